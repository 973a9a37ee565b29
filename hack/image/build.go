package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// rootModule is the module path Build expects at Options.Root.
	rootModule = "github.com/kshard/kshard"
	// operatorPackage is what the image runs.
	operatorPackage = "./cmd/example-operator"
	// Entrypoint is the binary's path in the image. Dockerfile uses the same.
	Entrypoint = "/example-operator"
	// User is the image's user and group: distroless's "nonroot", which
	// deploy/statefulset.yaml's runAsUser/runAsGroup match.
	User = "65532:65532"
	// refNameAnnotation names an image inside an OCI layout (by its tag, as
	// skopeo's oci:DIR:TAG expects).
	refNameAnnotation = "org.opencontainers.image.ref.name"
)

// Options configure Build. Every field has a default, applied in
// withDefaults.
type Options struct {
	// Root is the kshard checkout. Default ".".
	Root string
	// Out is the output directory. Default Root/_output/image.
	Out string
	// Ref is the image reference. Default DefaultRef.
	Ref string
	// Arch is the GOARCH of the binary and the image. Default runtime.GOARCH.
	Arch string
	// Created is the image's creation time, and the time of every file in
	// its layer. Default the Unix epoch, so that a build is reproducible.
	Created time.Time
	// Binary, if set, is a prebuilt linux/Arch binary to package instead of
	// building one. Tests use it to build the image twice from one binary.
	Binary string
}

func (o Options) arch() string {
	if o.Arch == "" {
		return runtime.GOARCH
	}
	return o.Arch
}

func (o Options) withDefaults() Options {
	if o.Root == "" {
		o.Root = "."
	}
	if o.Out == "" {
		o.Out = filepath.Join(o.Root, "_output", "image")
	}
	if o.Ref == "" {
		o.Ref = DefaultRef
	}
	o.Arch = o.arch()
	if o.Created.IsZero() {
		o.Created = time.Unix(0, 0).UTC()
	}
	return o
}

// Result says what Build wrote.
type Result struct {
	Ref     string  // the full reference, e.g. ghcr.io/kshard/example-operator:v0.1.0
	Tag     string  // its tag, as the OCI layout names the image
	Digest  v1.Hash // the image manifest's digest
	Layout  string  // the OCI image layout directory
	Tarball string  // the docker-load archive
}

// Build builds the example operator for linux/Arch with CGO disabled (a
// scratch image has no libc), packages it as described in the package doc,
// and writes the OCI layout and the archive under Out.
func Build(ctx context.Context, opts Options) (Result, error) {
	opts = opts.withDefaults()
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return Result{}, err
	}
	if err := checkRoot(root); err != nil {
		return Result{}, err
	}
	tag, err := name.NewTag(opts.Ref, name.StrictValidation)
	if err != nil {
		return Result{}, fmt.Errorf("-ref %q is not a full image reference with a tag (like %s): %w", opts.Ref, DefaultRef, err)
	}
	out, err := filepath.Abs(opts.Out)
	if err != nil {
		return Result{}, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return Result{}, fmt.Errorf("creating the output directory: %w", err)
	}

	bin := opts.Binary
	if bin == "" {
		bin = filepath.Join(out, "example-operator-linux-"+opts.Arch)
		if err := buildBinary(ctx, root, bin, opts.Arch); err != nil {
			return Result{}, err
		}
	}
	img, err := Image(bin, opts.Arch, opts.Created)
	if err != nil {
		return Result{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return Result{}, err
	}

	res := Result{Ref: tag.String(), Tag: tag.TagStr(), Digest: digest,
		Layout: filepath.Join(out, "oci"), Tarball: filepath.Join(out, "example-operator.tar")}
	// A layout keeps every blob ever appended: start it afresh.
	if err := os.RemoveAll(res.Layout); err != nil {
		return Result{}, err
	}
	p, err := layout.Write(res.Layout, empty.Index)
	if err != nil {
		return Result{}, fmt.Errorf("writing the OCI layout: %w", err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{refNameAnnotation: res.Tag})); err != nil {
		return Result{}, fmt.Errorf("writing the OCI layout: %w", err)
	}
	if err := tarball.WriteToFile(res.Tarball, tag, img); err != nil {
		return Result{}, fmt.Errorf("writing the image archive: %w", err)
	}
	return res, nil
}

// checkRoot makes sure root is the kshard checkout, so that a wrong -root
// gets a clear message rather than a confusing go build error.
func checkRoot(root string) error {
	f, err := os.Open(filepath.Join(root, "go.mod"))
	if err != nil {
		return fmt.Errorf("-root %s: %w; pass the kshard checkout (make image does)", root, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "module ") {
			if mod := strings.TrimSpace(strings.TrimPrefix(line, "module ")); mod != rootModule {
				return fmt.Errorf("-root %s holds module %s, not %s; pass the kshard checkout", root, mod, rootModule)
			}
			return nil
		}
	}
	return fmt.Errorf("-root %s: go.mod declares no module; pass the kshard checkout", root)
}

// buildBinary builds the operator statically: CGO_ENABLED=0 (no libc in
// the image), -trimpath and no symbol tables (smaller, reproducible).
func buildBinary(ctx context.Context, root, out, arch string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, operatorPackage)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for linux/%s: %w\n%s", operatorPackage, arch, err, b)
	}
	return nil
}

// Image packages the binary at bin as the image: one layer on an empty
// base, entrypoint Entrypoint, user User, OCI media types, and every time
// set to created.
func Image(bin, arch string, created time.Time) (v1.Image, error) {
	data, err := layerTar(bin, created)
	if err != nil {
		return nil, err
	}
	// Compress once here: the layer is read for its digest, the layout and
	// the archive, and a gzip per read would triple the build time.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz) // no name or mtime in the header: reproducible
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	compressed := gz.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(compressed)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("making the layer: %w", err)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "hack/image: example-operator on scratch",
			Comment:   "built without a container daemon by kshard's hack/image",
		},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: created}
	cf.Config.Entrypoint = []string{Entrypoint}
	cf.Config.Cmd = nil
	cf.Config.User = User
	cf.Config.WorkingDir = "/"
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":       "example-operator",
		"org.opencontainers.image.description": "kshard's reference shard-aware operator",
		"org.opencontainers.image.source":      "https://github.com/kshard/kshard",
	}
	return mutate.ConfigFile(img, cf)
}

// layerTar is the layer's content: the binary, and /etc/passwd and
// /etc/group naming the non-root user so tools show a name for 65532.
func layerTar(bin string, created time.Time) ([]byte, error) {
	exe, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("reading the operator binary: %w", err)
	}
	if len(exe) < 4 || string(exe[:4]) != "\x7fELF" {
		return nil, fmt.Errorf("%s is not an ELF binary; the image runs on linux", bin)
	}
	entries := []struct {
		name string
		mode int64
		data []byte // nil for a directory
	}{
		{"etc/", 0o755, nil},
		{"etc/passwd", 0o644, []byte("root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\n")},
		{"etc/group", 0o644, []byte("root:x:0:\nnonroot:x:65532:\n")},
		{strings.TrimPrefix(Entrypoint, "/"), 0o755, exe},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		// Owned by root (uid/gid 0) and not writable by 65532.
		h := &tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: e.mode, Size: int64(len(e.data)), ModTime: created, Format: tar.FormatPAX}
		if e.data == nil {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("writing the layer: %w", err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("writing the layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("writing the layer: %w", err)
	}
	return buf.Bytes(), nil
}
