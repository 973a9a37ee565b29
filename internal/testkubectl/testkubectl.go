// Package testkubectl finds the kubectl that kshard's tests drive: the one
// `make` builds from the control plane's pinned sources
// (hack/ensure-kubectl.sh) and names in KSHARD_KUBECTL, else kubectl on
// PATH. A check that needs kubectl fails without one when CI=true, so CI
// never passes by skipping it; elsewhere it skips, saying how to get one.
//
// It is test support: only tests (and the e2e harness) import it.
package testkubectl

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// EnvKubectl names the kubectl binary the tests run; make sets it.
const EnvKubectl = "KSHARD_KUBECTL"

// ErrMissing is wrapped by Path's error when no kubectl is found.
var ErrMissing = errors.New("no kubectl: run the tests through make (it builds kubectl from the pinned sources with hack/ensure-kubectl.sh and sets " + EnvKubectl + "), set " + EnvKubectl + ", or put kubectl on PATH")

// Path returns the kubectl to run: $KSHARD_KUBECTL, which must be an
// executable file when set, else kubectl on PATH.
func Path() (string, error) {
	if p := os.Getenv(EnvKubectl); p != "" {
		fi, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvKubectl, p, err)
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%s=%s is not an executable file", EnvKubectl, p)
		}
		return p, nil
	}
	p, err := exec.LookPath("kubectl")
	if err != nil {
		return "", fmt.Errorf("%w (%v)", ErrMissing, err)
	}
	return p, nil
}

// Require returns Path's kubectl, or ends the test without one: failed
// under CI=true, skipped otherwise, with what to do either way.
func Require(t testing.TB) string {
	t.Helper()
	p, err := Path()
	if err == nil {
		return p
	}
	Missing(t, err)
	return ""
}

// Missing ends a test that cannot run its kubectl check for err (from
// Path): failed under CI=true, skipped otherwise.
func Missing(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("kubectl check under CI=true: %v", err)
	}
	t.Skipf("kubectl check skipped: %v", err)
}
