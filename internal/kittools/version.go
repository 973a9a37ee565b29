package kittools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// manifestVersion reads the version a cache entry (or a directory made from
// one, as KSHARD_BIN_DIR often is) records in its manifest.json.
func manifestVersion(dir string) string {
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return ""
	}
	var m manifest
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	return m.KubernetesVersion
}

// apiServerVersion asks the binary (kube-apiserver --version prints
// "Kubernetes v1.36.3"), for binaries that carry no manifest.
func apiServerVersion(ctx context.Context, apiserver string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, apiserver, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", apiserver, err)
	}
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "Kubernetes ")), nil
}

// ResolveVersion fills b.KubernetesVersion when it is unknown (binaries
// from KSHARD_BIN_DIR or controlplane.Options.BinDir without a manifest),
// from the directory's manifest or the binary itself. A binary that cannot
// say leaves it empty.
func (b *Binaries) ResolveVersion(ctx context.Context) {
	if b.KubernetesVersion != "" {
		return
	}
	if v := manifestVersion(b.Dir()); v != "" {
		b.KubernetesVersion = v
		return
	}
	if v, err := apiServerVersion(ctx, b.APIServer); err == nil {
		b.KubernetesVersion = v
	}
}
