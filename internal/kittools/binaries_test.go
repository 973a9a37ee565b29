package kittools

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCorruptCachedBinaryIsDetected(t *testing.T) {
	dir := t.TempDir()
	if err := verifyCached(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("empty dir: got %v, want not-exist", err)
	}
	m := `{"kubernetesVersion":"v0","sha256":{}}`
	for name := range toolsPackages {
		os.WriteFile(filepath.Join(dir, name), []byte("binary "+name), 0o755)
	}
	sums := map[string]string{}
	for name := range toolsPackages {
		s, _ := fileSHA256(filepath.Join(dir, name))
		sums[name] = s
	}
	m = `{"kubernetesVersion":"v0","sha256":{"etcd":"` + sums["etcd"] + `","kube-apiserver":"` + sums["kube-apiserver"] + `","kube-controller-manager":"` + sums["kube-controller-manager"] + `"}}`
	os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(m), 0o644)
	if err := verifyCached(dir); err != nil {
		t.Fatalf("intact cache rejected: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "etcd"), []byte("trunc"), 0o755)
	if err := verifyCached(dir); err == nil || !strings.Contains(err.Error(), "etcd") {
		t.Fatalf("corrupt etcd accepted: %v", err)
	}
	os.Remove(filepath.Join(dir, "kube-apiserver"))
	if err := verifyCached(dir); err == nil {
		t.Fatal("missing kube-apiserver accepted")
	}
}

// TestCorruptCachedBinaryIsRebuilt damages a copy of the real cache and checks
// that Ensure rebuilds it (a relink from Go's build cache).
func TestCorruptCachedBinaryIsRebuilt(t *testing.T) {
	if testing.Short() {
		t.Skip("relinks the control-plane binaries; skipped in -short")
	}
	ctx := context.Background()
	good, err := Ensure(ctx, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	t.Setenv(envCacheDir, cache)
	src := filepath.Dir(good.APIServer)
	dst := filepath.Join(cache, filepath.Base(src))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"manifest.json", binAPIServer, binControllerManager} {
		if err := os.Link(filepath.Join(src, f), filepath.Join(dst, f)); err != nil {
			t.Fatal(err)
		}
	}
	// etcd is missing from the copy: it must come back, verified.
	start := time.Now()
	got, err := Ensure(ctx, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rebuild took %s", time.Since(start).Round(time.Second))
	if err := verifyCached(filepath.Dir(got.Etcd)); err != nil {
		t.Fatalf("rebuilt cache does not verify: %v", err)
	}
	if out, err := exec.Command(got.Etcd, "--version").CombinedOutput(); err != nil || !strings.Contains(string(out), "etcd Version") {
		t.Fatalf("rebuilt etcd does not run: %v\n%s", err, out)
	}
}

// In takes a directory whose three binaries are executable files, with the
// version its manifest records, and names a missing one.
func TestInChecksTheBinaries(t *testing.T) {
	dir := t.TempDir()
	if _, err := In(dir); err == nil || !strings.Contains(err.Error(), binAPIServer) {
		t.Fatalf("empty dir: err = %v, want one naming %s", err, binAPIServer)
	}
	for name := range toolsPackages {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"kubernetesVersion":"v1.36.3"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := In(dir)
	if err != nil {
		t.Fatal(err)
	}
	if b.Dir() != dir || b.Etcd != filepath.Join(dir, binEtcd) || b.KubernetesVersion != "v1.36.3" {
		t.Fatalf("In(%s) = %+v", dir, b)
	}
	if err := os.Chmod(filepath.Join(dir, binEtcd), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := In(dir); err == nil || !strings.Contains(err.Error(), "not an executable") {
		t.Fatalf("etcd not executable: err = %v", err)
	}
}
