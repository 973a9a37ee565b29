package controlplane

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// ForTest starts a control plane for t and stops it when the test ends. The
// files are kept (and their location logged) when the test failed. A control
// plane that cannot start fails the test: kshard's tests are meant to run
// against a real API server, so a skip would hide a broken setup. Under
// `go test -short`, which means unit tests only, it skips t instead of
// starting one, saying why (see SkipIfShort). Options the binaries'
// Kubernetes version lacks (ErrUnsupportedVersion) skip t, naming both.
func ForTest(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	SkipIfShort(t)
	if opts.Progress == nil {
		opts.Progress = os.Stderr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	cp, err := Start(ctx, opts)
	if errors.Is(err, ErrUnsupportedVersion) {
		// The binaries are older than the test needs (make compat runs
		// 1.34 and 1.35): not a broken setup, so say so and skip.
		t.Skipf("skipped on these binaries: %v", err)
	}
	if err != nil {
		t.Fatalf("starting control plane: %v", err)
	}
	t.Logf("control plane up in %s at %s (files: %s)", time.Since(start).Round(time.Millisecond), cp.Host(), cp.Dir())
	t.Cleanup(func() {
		if t.Failed() {
			cp.KeepFiles()
			t.Logf("test failed: control-plane logs kept in %s", cp.Dir())
		}
		if err := cp.Stop(); err != nil {
			t.Logf("stopping control plane: %v", err)
		}
	})
	return cp
}

// SkipIfShort skips t under `go test -short` (unit tests only), naming the
// reason: t needs a control plane (etcd and kube-apiserver processes). Call
// it first in tests that start one other than through ForTest.
func SkipIfShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a control plane (etcd and kube-apiserver processes); -short runs unit tests only")
	}
}
