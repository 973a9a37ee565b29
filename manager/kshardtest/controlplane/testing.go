package controlplane

import (
	"context"
	"os"
	"testing"
	"time"
)

// ForTest starts a control plane for t and stops it when the test ends. The
// files are kept (and their location logged) when the test failed. A control
// plane that cannot start fails the test: kshard's tests are meant to run
// against a real API server, so a skip would hide a broken setup.
func ForTest(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	if opts.Progress == nil {
		opts.Progress = os.Stderr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	cp, err := Start(ctx, opts)
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
