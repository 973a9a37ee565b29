package controlplane

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestStartBoundRetriesOnlyPortClashes: startBound starts again on new
// ports, killing the failed process, while the failure is a taken port, up
// to portAttempts; it returns any other failure at once.
func TestStartBoundRetriesOnlyPortClashes(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary on PATH to stand in for a component")
	}
	dir := t.TempDir()
	clash := fmt.Errorf("etcd: %w", errAddrInUse)
	other := errors.New("etcd exited early")
	for _, tc := range []struct {
		name     string
		failures []error // ready's answers, in order, before it succeeds
		wantErr  error
		wantPick int
	}{
		{name: "first try", wantPick: 1},
		{name: "two clashes", failures: []error{clash, clash}, wantPick: 3},
		{name: "clashes until the attempts run out", failures: slices.Repeat([]error{clash}, portAttempts), wantErr: errAddrInUse, wantPick: portAttempts},
		{name: "another failure is not retried", failures: []error{clash, other}, wantErr: other, wantPick: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var started []*component
			picks := 0
			p, ports, err := startBound(context.Background(), bindAttempt{
				pick: func() ([]int, error) { picks++; return []int{20000 + picks}, nil },
				start: func(ports []int) (*component, error) {
					c, err := startProcess("stand-in", filepath.Join(dir, fmt.Sprint(ports[0])+".log"), sleep, "60")
					started = append(started, c)
					return c, err
				},
				ready: func(_ context.Context, _ *component, _ []int) error {
					if i := len(started) - 1; i < len(tc.failures) {
						return tc.failures[i]
					}
					return nil
				},
			})
			t.Cleanup(func() { p.kill() })
			if picks != tc.wantPick {
				t.Errorf("ports picked %d times, want %d", picks, tc.wantPick)
			}
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || p != nil {
					t.Fatalf("startBound = %v, %v; want no component and %v", p, err, tc.wantErr)
				}
			} else if err != nil || p != started[len(started)-1] || ports[0] != 20000+picks {
				t.Fatalf("startBound = %v, %v, %v; want the last start on the last ports", p, ports, err)
			}
			for _, c := range started {
				if c == p {
					continue
				}
				if _, exited := c.Exited(); !exited {
					t.Errorf("a failed attempt's process is still running")
				}
			}
		})
	}
}

// skipRecorder is a testing.TB whose Skip records its reason and ends the
// calling goroutine, as testing's does.
type skipRecorder struct {
	testing.TB
	skipped string
}

func (r *skipRecorder) Skip(args ...any) {
	r.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}

// Under -short (unit tests only) ForTest skips, saying why, instead of
// starting a control plane. The test sets the flag itself, so that it
// checks this in every run.
func TestForTestSkipsUnderShort(t *testing.T) {
	was := flag.Lookup("test.short").Value.String()
	if err := flag.Set("test.short", "true"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = flag.Set("test.short", was) })
	rec := &skipRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ForTest(rec, Options{})
	}()
	<-done
	if !strings.Contains(rec.skipped, "needs a control plane") || !strings.Contains(rec.skipped, "-short") {
		t.Fatalf("ForTest under -short: skip reason %q, want one naming the control plane and -short", rec.skipped)
	}
}
