package main

import (
	"archive/tar"
	"context"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// repoRoot is the kshard checkout, seen from this package's directory (the
// working directory of its tests).
const repoRoot = "../.."

// TestImage is the check CI runs on the image: it runs the tool as `make
// image` does, reads the image back from the OCI layout, checks its config,
// extracts the binary from the layer, runs `--help` on the host, and checks
// that the docker-load archive holds the same image and that packaging the
// same binary again is bit-identical. The tool runs as its own process,
// built without -race: under the race detector its gzip alone takes ~30 s.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the example operator (CGO_ENABLED=0) and its image; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tool := filepath.Join(t.TempDir(), "image")
	if b, err := exec.CommandContext(ctx, "go", "build", "-o", tool, ".").CombinedOutput(); err != nil {
		t.Fatalf("building the image tool: %v\n%s", err, b)
	}
	runTool := func(out string, args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, tool, append([]string{"-root", repoRoot, "-out", out}, args...)...)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, b)
		}
		if !strings.Contains(string(b), "built "+DefaultRef+" (linux/"+runtime.GOARCH+", sha256:") {
			t.Fatalf("the image tool did not report the image it built:\n%s", b)
		}
	}
	out := t.TempDir()
	runTool(out)
	tag, err := name.NewTag(DefaultRef)
	if err != nil {
		t.Fatal(err)
	}

	img := imageFromLayout(t, filepath.Join(out, "oci"), tag.TagStr())
	if mt, err := img.MediaType(); err != nil || mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %q (%v), want %q", mt, err, types.OCIManifestSchema1)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/example-operator"}) || len(cf.Config.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want [/example-operator] and no cmd", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (non-root, as deploy/statefulset.yaml runs it)", cf.Config.User)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want exactly one on the empty base", len(layers), err)
	}

	files := extract(t, img)
	wantFiles := []string{"etc", "etc/group", "etc/passwd", "example-operator"}
	if got := sortedKeys(files); !slices.Equal(got, wantFiles) {
		t.Errorf("layer holds %q, want %q", got, wantFiles)
	}
	if !strings.Contains(string(files["etc/passwd"].data), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd does not name user 65532:\n%s", files["etc/passwd"].data)
	}
	exe := files["example-operator"]
	if exe.hdr == nil {
		t.Fatal("the layer has no example-operator")
	}
	if exe.hdr.Mode != 0o755 || exe.hdr.Uid != 0 || exe.hdr.Gid != 0 {
		t.Errorf("example-operator: mode %o uid %d gid %d, want 755 owned by root (not writable by the user it runs as)", exe.hdr.Mode, exe.hdr.Uid, exe.hdr.Gid)
	}
	bin := filepath.Join(t.TempDir(), "example-operator")
	if err := os.WriteFile(bin, exe.data, 0o755); err != nil {
		t.Fatal(err)
	}
	checkStatic(t, bin)
	outb, err := exec.CommandContext(ctx, bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("the binary from the layer: --help failed: %v\n%s", err, outb)
	}
	if !strings.Contains(string(outb), "Usage: example-operator") {
		t.Fatalf("the binary from the layer: --help printed no usage:\n%s", outb)
	}

	// The archive carries the same config and layer.
	fromTar, err := tarball.ImageFromPath(filepath.Join(out, "example-operator.tar"), &tag)
	if err != nil {
		t.Fatalf("reading the archive back: %v", err)
	}
	sameContent(t, img, fromTar)

	// Packaging the same binary again gives the same image: the build is
	// reproducible, so a digest identifies the source.
	out2 := t.TempDir()
	runTool(out2, "-binary", filepath.Join(out, "example-operator-linux-"+runtime.GOARCH))
	d1, err1 := img.Digest()
	d2, err2 := imageFromLayout(t, filepath.Join(out2, "oci"), tag.TagStr()).Digest()
	if err := errors.Join(err1, err2); err != nil || d1 != d2 {
		t.Errorf("packaging the same binary twice gave %v and %v (%v)", d1, d2, err)
	}
}

// imageFromLayout finds the one image the layout names by tag.
func imageFromLayout(t *testing.T, dir, tag string) v1.Image {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("reading the OCI layout: %v", err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 {
		t.Fatalf("the layout lists %d manifests, want 1", len(m.Manifests))
	}
	desc := m.Manifests[0]
	if got := desc.Annotations[refNameAnnotation]; got != tag {
		t.Fatalf("the layout names its image %q, want %q", got, tag)
	}
	img, err := idx.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

type entry struct {
	hdr  *tar.Header
	data []byte
}

// extract reads the image's flattened filesystem.
func extract(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string]entry{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatalf("reading the layer: %v", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = entry{hdr: h, data: data}
	}
}

// checkStatic fails unless bin is a statically linked ELF: a scratch image
// has no dynamic loader and no libc.
func checkStatic(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("the binary from the layer is not ELF: %v", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the binary from the layer asks for a dynamic loader (PT_INTERP); it would not start on scratch: build it with CGO_ENABLED=0")
		}
	}
}

func sameContent(t *testing.T, want, got v1.Image) {
	t.Helper()
	wc, err1 := want.ConfigName()
	gc, err2 := got.ConfigName()
	if err := errors.Join(err1, err2); err != nil || wc != gc {
		t.Errorf("the archive's config is %v, the layout's %v (%v)", gc, wc, err)
	}
	wl, err1 := want.Layers()
	gl, err2 := got.Layers()
	if err := errors.Join(err1, err2); err != nil || len(wl) != len(gl) {
		t.Fatalf("the archive has %d layers, the layout %d (%v)", len(gl), len(wl), err)
	}
	for i := range wl {
		wd, err1 := wl[i].DiffID()
		gd, err2 := gl[i].DiffID()
		if err := errors.Join(err1, err2); err != nil || wd != gd {
			t.Errorf("layer %d: the archive's is %v, the layout's %v (%v)", i, gd, wd, err)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestDeployRunsTheBuiltTag keeps deploy/ pointing at what `make image`
// tags, with the user the image runs as.
func TestDeployRunsTheBuiltTag(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "statefulset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{"image: " + DefaultRef, "runAsUser: 65532", "runAsGroup: 65532", "runAsNonRoot: true"} {
		if !strings.Contains(s, want) {
			t.Errorf("deploy/statefulset.yaml does not say %q", want)
		}
	}
}

// TestDockerfileMatches keeps the Dockerfile, which cannot be built here,
// describing the same image as the daemonless build.
func TestDockerfileMatches(t *testing.T) {
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{
		"FROM scratch", "CGO_ENABLED=0", "-trimpath", "./cmd/example-operator",
		"USER " + User, `ENTRYPOINT ["` + Entrypoint + `"]`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("Dockerfile does not say %q", want)
		}
	}
}

func TestBadInputIsNamed(t *testing.T) {
	ctx := context.Background()
	_, err := Build(ctx, Options{Root: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "-root") {
		t.Errorf("a directory without go.mod as -root: %v, want an error naming -root", err)
	}
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "go.mod"), []byte("module example.com/other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Build(ctx, Options{Root: other})
	if err == nil || !strings.Contains(err.Error(), "example.com/other") {
		t.Errorf("another module as -root: %v, want an error naming it", err)
	}
	_, err = Build(ctx, Options{Root: repoRoot, Ref: "Not A Ref", Out: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "-ref") {
		t.Errorf("a malformed -ref: %v, want an error naming -ref", err)
	}
	notELF := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = Build(ctx, Options{Root: repoRoot, Out: t.TempDir(), Binary: notELF})
	if err == nil || !strings.Contains(err.Error(), "not an ELF binary") {
		t.Errorf("a non-ELF binary: %v, want an error saying so", err)
	}
	if err := run(ctx, []string{"extra"}, io.Discard); err == nil || !strings.Contains(err.Error(), "unexpected arguments") {
		t.Errorf("a positional argument: %v, want an error", err)
	}
}
