package controlplane

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/kshard/kshard/internal/kittools"
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

// checkVersion refuses options the binaries' version cannot honour, naming
// the version, the option and what to do, before any process starts.
func checkVersion(opts Options, b kittools.Binaries) error {
	if !opts.ShardedListAndWatch {
		return nil
	}
	minor, ok := minorOf(b.KubernetesVersion)
	if !ok || minor >= shardedListAndWatchMinor {
		// Unknown: let the API server decide; its log tail names a refused gate.
		return nil
	}
	return fmt.Errorf("controlplane: Options.ShardedListAndWatch needs Kubernetes 1.%d or later, but %s is %s (feature gate ShardedListAndWatch does not exist there): %w; run this test against 1.%d+ binaries (unset %s, or point it at them)",
		shardedListAndWatchMinor, b.APIServer, b.KubernetesVersion, ErrUnsupportedVersion, shardedListAndWatchMinor, kittools.EnvBinDir)
}
