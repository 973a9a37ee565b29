package testkubectl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPathPrefersTheEnvironment(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "kubectl")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvKubectl, bin)
	if p, err := Path(); err != nil || p != bin {
		t.Fatalf("Path = %q, %v; want %q", p, err, bin)
	}
}

func TestPathRefusesABadEnvironment(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "kubectl")
	if err := os.WriteFile(notExec, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, "missing"), dir, notExec} {
		t.Setenv(EnvKubectl, p)
		if _, err := Path(); err == nil || !strings.Contains(err.Error(), EnvKubectl) {
			t.Errorf("%s=%s: Path err = %v, want one naming %s", EnvKubectl, p, err, EnvKubectl)
		}
	}
}

func TestPathWithoutKubectlSaysWhatToDo(t *testing.T) {
	t.Setenv(EnvKubectl, "")
	t.Setenv("PATH", t.TempDir())
	if _, err := Path(); err == nil || !strings.Contains(err.Error(), "hack/ensure-kubectl.sh") {
		t.Fatalf("Path err = %v, want it to say how to get kubectl", err)
	}
}
