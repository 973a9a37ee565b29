package kittools

import (
	"os"
	"path/filepath"
	"testing"
)

func TestResolveVersionReadsTheManifest(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"kubernetesVersion":"v1.35.5"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	b := binariesIn(dir, "")
	b.ResolveVersion(t.Context())
	if b.KubernetesVersion != "v1.35.5" {
		t.Fatalf("version = %q, want v1.35.5 from the manifest", b.KubernetesVersion)
	}
	// No manifest and no runnable binary: unknown, not an error.
	b = binariesIn(t.TempDir(), "")
	b.ResolveVersion(t.Context())
	if b.KubernetesVersion != "" {
		t.Fatalf("version = %q, want empty", b.KubernetesVersion)
	}
}
