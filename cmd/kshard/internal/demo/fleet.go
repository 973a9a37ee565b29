package demo

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kshard/kshard/e2e/controlplane"
)

// fleet owns the example-operator replica processes: it starts them, signals
// them and waits for every one it started.
type fleet struct {
	executable string   // this binary, re-executed with the hidden command
	command    string   // the hidden command's name
	baseArgs   []string // flags every replica gets
	logDir     string

	mu       sync.Mutex // guards replicas
	replicas []*replica // in start order, exited ones included
}

// replica is one example-operator process.
type replica struct {
	identity    string
	metricsAddr string
	probeAddr   string
	logPath     string
	started     time.Time

	cmd      *exec.Cmd
	exited   chan struct{} // closed once the process is reaped and err set
	err      error         // cmd.Wait's result
	exitedAt time.Time     // when cmd.Wait returned
}

func (r *replica) running() bool {
	select {
	case <-r.exited:
		return false
	default:
		return true
	}
}

// exitStatus describes how the process ended, for the table and errors.
func (r *replica) exitStatus() string {
	if r.running() {
		return "running"
	}
	if r.err == nil {
		return "exited 0"
	}
	var ee *exec.ExitError
	if errors.As(r.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by " + ws.Signal().String()
		}
		return fmt.Sprintf("exited %d", ee.ExitCode())
	}
	return r.err.Error()
}

// logTail returns the last n lines of the replica's log, for errors.
func (r *replica) logTail(n int) string {
	data, err := os.ReadFile(r.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// start runs a new replica with identity on free loopback ports. It does
// not wait for readiness.
func (f *fleet) start(identity string) (*replica, error) {
	ports, err := controlplane.FreePorts(2)
	if err != nil {
		return nil, err
	}
	r := &replica{
		identity:    identity,
		metricsAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		probeAddr:   net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])),
		logPath:     filepath.Join(f.logDir, identity+".log"),
		exited:      make(chan struct{}),
	}
	logFile, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	args := append([]string{f.command}, f.baseArgs...)
	args = append(args, "--identity", identity,
		"--metrics-bind-address", r.metricsAddr, "--health-probe-bind-address", r.probeAddr)
	r.cmd = exec.Command(f.executable, args...)
	r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
	// Its own process group keeps the terminal's Ctrl-C away from the
	// replica (the demo stops it gracefully, in order); Pdeathsig kills it
	// if the demo dies without cleaning up.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting replica %s (%s): %w", identity, f.executable, err)
	}
	r.started = time.Now()
	f.mu.Lock()
	f.replicas = append(f.replicas, r)
	f.mu.Unlock()
	go func() { // owned by the fleet: stopAll waits for exited
		r.err = r.cmd.Wait()
		r.exitedAt = time.Now()
		logFile.Close()
		close(r.exited)
	}()
	return r, nil
}

// signal sends sig to the replica's process group.
func (r *replica) signal(sig syscall.Signal) {
	if r.running() {
		_ = syscall.Kill(-r.cmd.Process.Pid, sig)
	}
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
		r.signal(syscall.SIGTERM)
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
wait:
	for _, r := range rs {
		select {
		case <-r.exited:
		case <-deadline.C:
			break wait
		case <-hurry:
			break wait
		}
	}
	for _, r := range rs {
		r.signal(syscall.SIGKILL)
		<-r.exited
	}
}
