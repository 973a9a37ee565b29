package demo

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/kshard/kshard/internal/process"
)

// fleet owns the example-operator replica processes: it starts them, signals
// them and waits for every one it started.
type fleet struct {
	executable string   // the example-operator binary
	baseArgs   []string // flags every replica gets
	logDir     string

	mu       sync.Mutex // guards replicas
	replicas []*replica // in start order, exited ones included
}

// replica is one example-operator process.
type replica struct {
	identity    string
	metricsAddr string // bound on port 0, read from the replica's log
	proc        *process.Process
}

func (r *replica) running() bool { return r.proc.Running() }

// exitStatus describes how the process ended, for the table and errors.
func (r *replica) exitStatus() string {
	if exit, ok := r.proc.Exited(); ok {
		return exit.String()
	}
	return "running"
}

// exitedAt is when the process was reaped (zero while it runs).
func (r *replica) exitedAt() time.Time {
	exit, _ := r.proc.Exited()
	return exit.At
}

// bindTimeout bounds the wait for a replica to log its metrics address:
// it binds its servers before it does anything else.
const bindTimeout = time.Minute

// start runs a new replica with identity and waits until it has bound its
// metrics server on the port the kernel chose. It does not wait for
// readiness.
func (f *fleet) start(ctx context.Context, identity string) (*replica, error) {
	args := slices.Clone(f.baseArgs)
	args = append(args, "--identity", identity,
		"--metrics-bind-address", "127.0.0.1:0", "--metrics-secure=false", "--health-probe-bind-address", "127.0.0.1:0")
	// Plain HTTP metrics: the demo scrapes its own replicas on loopback.
	// The process runner puts the replica in its own process group, which
	// keeps the terminal's Ctrl-C away from it: the demo stops it
	// gracefully, in order.
	proc, err := process.Start(process.Options{
		Name: "replica " + identity, Path: f.executable, Args: args,
		LogPath: filepath.Join(f.logDir, identity+".log"),
	})
	if err != nil {
		return nil, err
	}
	r := &replica{identity: identity, proc: proc}
	f.mu.Lock()
	f.replicas = append(f.replicas, r)
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, bindTimeout)
	defer cancel()
	if r.metricsAddr, err = proc.ServingAddr(ctx, process.ServerMetrics); err != nil {
		return r, err // stopAll reaps it
	}
	return r, nil
}

// list returns the replicas started so far.
func (f *fleet) list() []*replica {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*replica(nil), f.replicas...)
}

// stopAll asks every running replica to leave (SIGTERM) and waits until all
// have exited. Replicas still running after grace, or as soon as hurry is
// closed, are killed.
func (f *fleet) stopAll(grace time.Duration, hurry <-chan struct{}) {
	rs := f.list()
	for _, r := range rs {
		_ = r.proc.Signal(syscall.SIGTERM)
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
wait:
	for _, r := range rs {
		select {
		case <-r.proc.Done():
		case <-deadline.C:
			break wait
		case <-hurry:
			break wait
		}
	}
	for _, r := range rs {
		r.proc.Kill()
	}
}
