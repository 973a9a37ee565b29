package demo

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/kshard/kshard/internal/kittools"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
)

// fakeRun runs the demo with a fake build and a control plane that fails to
// start, so only what happens before the control plane is up is exercised.
func fakeRun(ctx context.Context, timeout time.Duration, ensure func(context.Context, io.Writer) (kittools.Binaries, error)) error {
	_, err := Run(ctx, Options{
		Replicas: 3, Objects: 10, Timeout: timeout, Prog: "kshard",
		Stdout: io.Discard, Stderr: io.Discard,
		ensureBinaries: ensure,
		startControlPlane: func(context.Context, controlplane.Options) (*controlplane.ControlPlane, error) {
			return nil, errors.New("fake: the API server would not start")
		},
	})
	return err
}

func TestBuildDoesNotCountAgainstTimeout(t *testing.T) {
	// A build that outlasts --timeout many times over.
	slowBuild := func(ctx context.Context, _ io.Writer) (kittools.Binaries, error) {
		select {
		case <-time.After(300 * time.Millisecond): // the simulated build's length
			return kittools.Binaries{}, nil
		case <-ctx.Done():
			return kittools.Binaries{}, ctx.Err()
		}
	}
	err := fakeRun(context.Background(), 10*time.Millisecond, slowBuild)
	if err == nil || !strings.Contains(err.Error(), "starting the control plane: fake") {
		t.Fatalf("got %v, want the build to finish and the start's own error", err)
	}
	if strings.Contains(err.Error(), "--timeout") {
		t.Errorf("the build was charged to --timeout: %v", err)
	}
}

func TestBuildFailureNamesTheBuild(t *testing.T) {
	failing := func(context.Context, io.Writer) (kittools.Binaries, error) {
		return kittools.Binaries{}, errors.New("go build: exit status 1")
	}
	err := fakeRun(context.Background(), time.Minute, failing)
	if err == nil || !strings.HasPrefix(err.Error(), "building the control-plane binaries: go build") {
		t.Errorf("got %v, want an error naming the build", err)
	}
}

func TestCtrlCStopsTheBuild(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	entered := make(chan struct{})
	blocking := func(ctx context.Context, _ io.Writer) (kittools.Binaries, error) {
		close(entered)
		<-ctx.Done()
		return kittools.Binaries{}, errors.New("build interrupted")
	}
	done := make(chan error, 1)
	go func() { done <- fakeRun(ctx, time.Minute, blocking) }()
	<-entered
	cancel() // Ctrl-C
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the build did not stop on Ctrl-C")
	}
}

func TestTimeoutErrorNamesThePhase(t *testing.T) {
	d := &demo{opts: Options{Timeout: 10 * time.Minute}, phase: "creating and reconciling 1000 Widgets"}
	runCtx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-runCtx.Done()
	err := d.explainTimeout(context.Background(), runCtx, context.DeadlineExceeded)
	for _, want := range []string{"--timeout 10m0s", "counted from when the control plane was up", "creating and reconciling 1000 Widgets"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want it to contain %q", err, want)
		}
	}
	// Ctrl-C is not a timeout, and success stays success.
	stopped, stop := context.WithCancel(context.Background())
	stop()
	if got := d.explainTimeout(stopped, runCtx, context.Canceled); !errors.Is(got, context.Canceled) {
		t.Errorf("after Ctrl-C: %v", got)
	}
	if got := d.explainTimeout(context.Background(), runCtx, nil); got != nil {
		t.Errorf("no error became %v", got)
	}
}
