package controlplane

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMinorOf(t *testing.T) {
	for _, tc := range []struct {
		in    string
		minor int
		ok    bool
	}{
		{"v1.34.5", 34, true},
		{"v1.37.2", 37, true},
		{"Kubernetes v1.35.5", 35, true},
		{"v1.38.0-beta.0", 38, true},
		{"v0.0.0-master+$Format:%H$", 0, false},
		{"", 0, false},
	} {
		minor, ok := minorOf(tc.in)
		if minor != tc.minor || ok != tc.ok {
			t.Errorf("minorOf(%q) = %d, %v; want %d, %v", tc.in, minor, ok, tc.minor, tc.ok)
		}
	}
}

// The gate is refused before anything starts on 1.34 and 1.35, allowed on
// 1.36+, and left to the API server when the version is unknown.
func TestCheckVersionRefusesTheGateBefore136(t *testing.T) {
	gate := Options{ShardedListAndWatch: true}
	for _, v := range []string{"v1.34.5", "v1.35.5"} {
		err := checkVersion(gate, Binaries{APIServer: "/bin/kube-apiserver", KubernetesVersion: v})
		if !errors.Is(err, ErrUnsupportedVersion) {
			t.Fatalf("%s: err = %v, want ErrUnsupportedVersion", v, err)
		}
		for _, want := range []string{v, "ShardedListAndWatch", "1.36", envBinDir} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not name %q", v, err, want)
			}
		}
		if err := checkVersion(Options{}, Binaries{KubernetesVersion: v}); err != nil {
			t.Errorf("%s without the gate: %v", v, err)
		}
	}
	for _, v := range []string{"v1.36.3", "v1.37.2", ""} {
		if err := checkVersion(gate, Binaries{KubernetesVersion: v}); err != nil {
			t.Errorf("%q: %v", v, err)
		}
	}
}

func TestResolveVersionReadsTheManifest(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"kubernetesVersion":"v1.35.5"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	b := binariesIn(dir, "")
	resolveVersion(t.Context(), &b)
	if b.KubernetesVersion != "v1.35.5" {
		t.Fatalf("version = %q, want v1.35.5 from the manifest", b.KubernetesVersion)
	}
	// No manifest and no runnable binary: unknown, not an error.
	b = binariesIn(t.TempDir(), "")
	resolveVersion(t.Context(), &b)
	if b.KubernetesVersion != "" {
		t.Fatalf("version = %q, want empty", b.KubernetesVersion)
	}
}
