package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ErrUnsupportedVersion is wrapped by Start when an option asks for
// something the binaries' Kubernetes version does not have (for instance
// ShardedListAndWatch before 1.36), so a test can skip instead of failing.
var ErrUnsupportedVersion = errors.New("not supported by this Kubernetes version")

// Minor versions in which API server features the options name first exist.
// The kit runs 1.34 and later (make compat); older servers are not tested.
const (
	// shardedListAndWatchMinor: the alpha gate ShardedListAndWatch is
	// registered from 1.36; 1.34 and 1.35 refuse to start when it is set
	// ("unrecognized feature gate").
	shardedListAndWatchMinor = 36
)

var releaseVersion = regexp.MustCompile(`\bv1\.(\d+)\.\d+\S*`)

// minorOf returns the minor number of a v1.X.Y version; ok is false for an
// empty or unstamped version (v0.0.0-master, a build without the version
// ldflags), whose features cannot be known.
func minorOf(version string) (minor int, ok bool) {
	m := releaseVersion.FindStringSubmatch(version)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

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

// resolveVersion fills b.KubernetesVersion when it is unknown (binaries from
// KSHARD_BIN_DIR or Options.Binaries), from the directory's manifest or the
// binary itself. A binary that cannot say leaves it empty.
func resolveVersion(ctx context.Context, b *Binaries) {
	if b.KubernetesVersion != "" {
		return
	}
	if v := manifestVersion(filepath.Dir(b.APIServer)); v != "" {
		b.KubernetesVersion = v
		return
	}
	if v, err := apiServerVersion(ctx, b.APIServer); err == nil {
		b.KubernetesVersion = v
	}
}

// checkVersion refuses options the binaries' version cannot honour, naming
// the version, the option and what to do, before any process starts.
func checkVersion(opts Options, b Binaries) error {
	if !opts.ShardedListAndWatch {
		return nil
	}
	minor, ok := minorOf(b.KubernetesVersion)
	if !ok || minor >= shardedListAndWatchMinor {
		// Unknown: let the API server decide; its log tail names a refused gate.
		return nil
	}
	return fmt.Errorf("controlplane: Options.ShardedListAndWatch needs Kubernetes 1.%d or later, but %s is %s (feature gate ShardedListAndWatch does not exist there): %w; run this test against 1.%d+ binaries (unset %s, or point it at them)",
		shardedListAndWatchMinor, b.APIServer, b.KubernetesVersion, ErrUnsupportedVersion, shardedListAndWatchMinor, envBinDir)
}
