// Command pack builds the pause command of this module as a static linux
// binary and writes it as a one-layer OCI image archive (an OCI image layout
// in a tar, what `ctr images import` reads), tagged with -ref. With -binary
// it packs that (static) binary instead, as /NAME run by -user: make
// kubelet-e2e's recording operator. Only the standard library: the archive
// is a handful of JSON documents and one tar layer, and every digest is
// computed here.
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"
)

func main() {
	out := flag.String("out", "", "the OCI archive to write (required)")
	ref := flag.String("ref", "localhost/kshard/pause:v1", "the image reference to tag it with")
	binary := flag.String("binary", "", "pack this static linux binary instead of building the pause command")
	user := flag.String("user", "65535:65535", "the image's user:group")
	flag.Parse()
	if err := run(*out, *ref, *binary, *user); err != nil {
		fmt.Fprintln(os.Stderr, "pack:", err)
		os.Exit(1)
	}
}

func run(out, ref, bin, user string) error {
	if out == "" {
		return errors.New("-out is required: the path of the OCI archive to write")
	}
	if bin == "" {
		tmp, err := os.MkdirTemp("", "kshard-pause-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		bin = filepath.Join(tmp, "pause")
		// The pause command is this module's root package: pack runs from it.
		build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GOWORK=off")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building the pause binary (run pack from hack/kubelet/pause): %w", err)
		}
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	name := filepath.Base(bin)
	layer, err := layerTar(name, data)
	if err != nil {
		return err
	}
	archive, err := imageArchive(layer, ref, "/"+name, user)
	if err != nil {
		return err
	}
	return os.WriteFile(out, archive, 0o644)
}

// epoch keeps the archive reproducible: the same binary gives the same digests.
var epoch = time.Unix(0, 0).UTC()

// layerTar is the image's only layer: /NAME, owned by root, mode 0755.
func layerTar(name string, bin []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{Name: name, Mode: 0o755, Size: int64(len(bin)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int               `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    map[string]string `json:"platform,omitempty"`
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// imageArchive lays out config, manifest and index as an OCI image layout
// (https://github.com/opencontainers/image-spec/blob/main/image-layout.md)
// and tars it.
func imageArchive(layer []byte, ref, entrypoint, user string) ([]byte, error) {
	config, err := json.Marshal(map[string]any{
		"created":      epoch.Format(time.RFC3339),
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config": map[string]any{
			"Entrypoint": []string{entrypoint},
			"User":       user,
		},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{digest(layer)}},
		"history": []map[string]any{{"created": epoch.Format(time.RFC3339), "created_by": "hack/kubelet/pause/pack"}},
	})
	if err != nil {
		return nil, err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        descriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: digest(config), Size: len(config)},
		"layers":        []descriptor{{MediaType: "application/vnd.oci.image.layer.v1.tar", Digest: digest(layer), Size: len(layer)}},
	})
	if err != nil {
		return nil, err
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []descriptor{{
			MediaType: "application/vnd.oci.image.manifest.v1+json", Digest: digest(manifest), Size: len(manifest),
			Platform: map[string]string{"architecture": runtime.GOARCH, "os": "linux"},
			Annotations: map[string]string{
				// containerd's importer names the image by this one.
				"io.containerd.image.name": ref,
				// and OCI tools by the tag.
				"org.opencontainers.image.ref.name": ref,
			},
		}},
	})
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	blob := func(b []byte) string { return "blobs/sha256/" + digest(b)[len("sha256:"):] }
	for _, f := range []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blob(config), config},
		{blob(manifest), manifest},
		{blob(layer), layer},
	} {
		if err := add(f.name, f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
