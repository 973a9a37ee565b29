package kshardtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/rest"

	"github.com/kshard/kshard/internal/process"
	"github.com/kshard/kshard/internal/recorder"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/manager"
)

// Replica is what one run of a replica is given: its identity and the
// incarnation naming this run in the records, a rest config for the
// control plane, the manager options the Env chose and the recorder for
// its reconciles. The options carry the Env's ring, namespace (as
// LeaseNamespace and WatchNamespace: clear WatchNamespace for PartitionBy
// namespace, which refuses one), timings and KeepPlaceOnLeave, the
// identity, a 10s GracefulShutdownTimeout, and probe and metrics servers
// on free loopback ports.
type Replica struct {
	Identity    string
	Incarnation string
	Config      *rest.Config
	Options     manager.Options
	Recorder    *Recorder
}

// RunFunc builds the operator's manager for r and runs it until ctx ends,
// as the operator's main does. It should build the manager with r.Config
// and r.Options, wrap its reconcilers with RecordReconciles(r.Recorder, …)
// and return what the manager's Start returns.
type RunFunc func(ctx context.Context, r Replica) error

// Command is a replica binary StartProcess runs. Its main calls
// ReplicaFromEnv and then the operator's RunFunc.
type Command struct {
	// Path is the executable (see Build). Required.
	Path string
	// Args are its arguments.
	Args []string
	// Env is added to its environment.
	Env []string
}

// member is one identity's latest run.
type member struct {
	identity, incarnation string
	env                   *Env

	// In-process replicas.
	gate   *gate
	cancel context.CancelFunc
	done   chan struct{} // closed when run returned
	err    error         // what run returned, set before done closes
	rec    *recorder.Writer

	// Process replicas.
	proc *process.Process

	// crashed is set by crash: the member counts as dead, though in this
	// process it may still be winding down.
	crashed bool
	// stopped is set by Stop: the member left on request.
	stopped bool
}

// endReport says how a member that is no longer running ended: its exit
// and the end of its log for a process, what run returned otherwise.
func (m *member) endReport() string {
	if m.proc != nil {
		x, _ := m.proc.Exited()
		return fmt.Sprintf(" (%s); last log lines:\n%s", x, m.proc.Tail(15))
	}
	return fmt.Sprintf(" (run returned %v)", m.err)
}

func (m *member) process() recorder.Process {
	return recorder.Process{Replica: m.identity, Incarnation: m.incarnation}
}

// alive says whether the member runs and has not crashed.
func (m *member) alive() bool { return !m.crashed && m.running() }

func (m *member) running() bool {
	if m.proc != nil {
		return m.proc.Running()
	}
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// crash ends the member at once: SIGKILL for a process; for a goroutine,
// its connection is cut and its context cancelled, and it winds down in the
// background (see wait). Its recorder stays open: the reconciles cut short
// by the cancellation are recorded as failed, and one that ignores the
// cancellation shows as running on, as it would.
func (m *member) crash() {
	m.crashed = true
	if m.proc != nil {
		m.proc.Kill()
		return
	}
	m.gate.set(gateCut)
	m.cancel()
}

// stop makes the member leave gracefully and waits up to timeout; it
// returns an error when it did not leave cleanly in time.
func (m *member) stop(timeout time.Duration) error {
	if m.proc != nil {
		x, err := m.proc.Stop(timeout)
		if err != nil {
			return fmt.Errorf("%w\n%s", err, m.proc.Tail(30))
		}
		if x.Code != 0 {
			return fmt.Errorf("it %s after SIGTERM, want exit 0\n%s", x, m.proc.Tail(30))
		}
		return nil
	}
	m.cancel()
	if err := m.wait(timeout); err != nil {
		return err
	}
	if m.err != nil && !errors.Is(m.err, context.Canceled) {
		return fmt.Errorf("it returned %w", m.err)
	}
	return nil
}

// wait waits up to timeout for the member's run to have returned.
func (m *member) wait(timeout time.Duration) error {
	if m.proc != nil {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_, err := m.proc.Wait(ctx)
		return err
	}
	select {
	case <-m.done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("it did not return within %s after its context was cancelled", timeout)
	}
}

// StartInProcess starts a new incarnation of identity running run on a
// goroutine of this process. identity must not be running. It does not
// wait for anything; see AwaitConverged.
func (e *Env) StartInProcess(identity string, run RunFunc) {
	e.t.Helper()
	m := e.newMember(identity)
	rec, err := recorder.Open(e.RecordDir(), m.process())
	if err != nil {
		e.t.Fatal(err)
	}
	m.rec = rec
	logPath := filepath.Join(e.logDir(), identity+"-"+m.incarnation+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		e.t.Fatal(err)
	}
	m.gate = newGate()
	cfg := e.cp.Config()
	cfg.Wrap(m.gate.wrap)
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.done = make(chan struct{})
	opts := e.managerOptions(identity)
	// JSON lines as a process replica writes, into a file of its own.
	var logMu sync.Mutex
	opts.Logger = funcr.NewJSON(func(obj string) {
		logMu.Lock()
		defer logMu.Unlock()
		fmt.Fprintln(logFile, obj)
	}, funcr.Options{LogTimestamp: true})
	r := Replica{Identity: identity, Incarnation: m.incarnation, Config: cfg, Options: opts, Recorder: &Recorder{w: rec}}
	go func() {
		defer close(m.done)
		defer logFile.Close()
		m.err = run(ctx, r)
		if m.err != nil && !errors.Is(m.err, context.Canceled) {
			logMu.Lock()
			fmt.Fprintf(logFile, "kshardtest: run returned: %v\n", m.err)
			logMu.Unlock()
		}
		_ = e.events.Append(recorder.Record{Kind: recorder.KindExit, Process: m.process(), At: time.Now().UnixNano()})
		_ = rec.Close()
	}()
	e.add(m)
}

// StartProcess starts a new incarnation of identity as a process running
// cmd, with its output in the Env's logs (under Dir). identity must not be running. The process
// finds its Replica through ReplicaFromEnv.
func (e *Env) StartProcess(identity string, cmd Command) {
	e.t.Helper()
	m := e.newMember(identity)
	env, err := e.replicaEnv(m)
	if err != nil {
		e.t.Fatal(err)
	}
	proc, err := process.Start(process.Options{
		Name:    identity,
		Path:    cmd.Path,
		Args:    cmd.Args,
		Env:     append(env, cmd.Env...),
		LogPath: filepath.Join(e.logDir(), identity+"-"+m.incarnation+".log"),
		// Recorded on the reaping goroutine, before anyone sees the exit.
		OnExit: func(x process.Exit) {
			_ = e.events.Append(recorder.Record{Kind: recorder.KindExit, Process: m.process(), At: x.At.UnixNano(), Code: x.Code})
		},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	m.proc = proc
	e.add(m)
}

func (e *Env) newMember(identity string) *member {
	e.t.Helper()
	e.mu.Lock()
	prev := e.replicas[identity]
	e.mu.Unlock()
	if prev != nil && prev.alive() {
		e.t.Fatalf("starting %s: it is already running (incarnation %s)", identity, prev.incarnation)
	}
	return &member{identity: identity, incarnation: randomID(), env: e}
}

func (e *Env) add(m *member) {
	e.mu.Lock()
	e.replicas[m.identity] = m
	e.all = append(e.all, m)
	e.mu.Unlock()
}

func (e *Env) running(verb, identity string) *member {
	e.t.Helper()
	e.mu.Lock()
	m := e.replicas[identity]
	e.mu.Unlock()
	if m == nil || !m.alive() {
		e.t.Fatalf("%s %s: it is not running", verb, identity)
	}
	return m
}

// Stop makes identity leave gracefully (SIGTERM, or its context cancelled
// in this process) and waits until it has, up to Options.StopTimeout. It
// fails the test when the replica does not leave cleanly in time.
func (e *Env) Stop(identity string) {
	e.t.Helper()
	m := e.running("stop", identity)
	_ = e.events.Append(recorder.Record{Kind: recorder.KindTerm, Process: m.process(), At: time.Now().UnixNano()})
	e.mu.Lock()
	m.stopped = true
	e.mu.Unlock()
	if err := m.stop(e.opts.StopTimeout); err != nil {
		e.t.Fatalf("stop %s: %v", identity, err)
	}
}

// Crash ends identity without a graceful leave: SIGKILL for a process; in
// this process its API-server connection is cut and its context cancelled
// (see the package doc). Its Leases expire. The crash is recorded as a
// fault lasting LeaseDuration (see Options.LivenessBound): a write that
// waits across several failovers is allowed each one's Lease.
func (e *Env) Crash(identity string) {
	e.t.Helper()
	m := e.running("crash", identity)
	at := time.Now()
	_ = e.events.Append(recorder.Record{Kind: recorder.KindKill, Process: m.process(), At: at.UnixNano()})
	_ = e.events.Fault("crash of "+m.process().String(), at, at.Add(e.opts.LeaseDuration))
	m.crash()
}

// Pause freezes identity until Resume: SIGSTOP for a process (see Check
// for how its records are judged); in this process every API request it
// makes hangs until Resume.
func (e *Env) Pause(identity string) {
	e.t.Helper()
	m := e.running("pause", identity)
	e.mu.Lock()
	if _, paused := e.pausedAt[identity]; !paused {
		e.pausedAt[identity] = time.Now()
	}
	if m.proc != nil {
		e.frozen[m.process()] = true
	}
	e.mu.Unlock()
	if m.proc != nil {
		if err := m.proc.Pause(); err != nil {
			e.t.Fatalf("pause %s: %v", identity, err)
		}
		return
	}
	m.gate.set(gateHold)
}

// Resume undoes Pause, and records the pause as a fault (see
// Options.LivenessBound).
func (e *Env) Resume(identity string) {
	e.t.Helper()
	m := e.running("resume", identity)
	if m.proc != nil {
		if err := m.proc.Resume(); err != nil {
			e.t.Fatalf("resume %s: %v", identity, err)
		}
	} else {
		m.gate.set(gateOpen)
	}
	resumed := time.Now()
	e.mu.Lock()
	paused, ok := e.pausedAt[identity]
	delete(e.pausedAt, identity)
	e.mu.Unlock()
	if ok {
		if err := e.events.Fault("pause of "+identity, paused, resumed); err != nil {
			e.t.Fatal(err)
		}
	}
}

// RollingRestart stops and restarts each identity in turn, as a
// StatefulSet's rolling update does, waiting for the ring to converge on
// all of them after each restart. start restarts one identity (e.g. a
// closure over StartInProcess or StartProcess).
func (e *Env) RollingRestart(timeout time.Duration, start func(identity string), identities ...string) {
	e.t.Helper()
	for i := len(identities) - 1; i >= 0; i-- {
		e.Stop(identities[i])
		start(identities[i])
		e.AwaitConverged(timeout, identities...)
	}
}

// envOptions is the environment variable through which StartProcess hands
// a replica its manager options for ReplicaFromEnv; the recorder's file is
// named by recorder's Env variables.
const envOptions = "KSHARDTEST_OPTIONS"

// processOptions are the manager options a process replica receives.
type processOptions struct {
	Ring, LeaseNamespace, Identity, WatchNamespace              string
	LeaseDuration, RenewPeriod, RenewDeadline, DrainGracePeriod time.Duration
	GracefulShutdownTimeout                                     time.Duration
	KeepPlaceOnLeave                                            bool
	MetricsBindAddress, HealthProbeBindAddress                  string
}

func (e *Env) replicaEnv(m *member) ([]string, error) {
	o := e.managerOptions(m.identity)
	raw, err := json.Marshal(processOptions{
		Ring: o.Ring, LeaseNamespace: o.LeaseNamespace, Identity: o.Identity, WatchNamespace: o.WatchNamespace,
		LeaseDuration: o.LeaseDuration, RenewPeriod: o.RenewPeriod, RenewDeadline: o.RenewDeadline, DrainGracePeriod: o.DrainGracePeriod,
		GracefulShutdownTimeout: o.GracefulShutdownTimeout, KeepPlaceOnLeave: o.KeepPlaceOnLeave,
		MetricsBindAddress: o.MetricsBindAddress, HealthProbeBindAddress: o.HealthProbeBindAddress,
	})
	if err != nil {
		return nil, err
	}
	return []string{
		"KUBECONFIG=" + e.cp.KubeconfigPath(),
		lease.EnvPodName + "=" + m.identity,
		lease.EnvPodNamespace + "=" + o.LeaseNamespace,
		recorder.EnvDir + "=" + e.RecordDir(),
		recorder.EnvReplica + "=" + m.identity,
		recorder.EnvIncarnation + "=" + m.incarnation,
		envOptions + "=" + string(raw),
	}, nil
}

// ReplicaFromEnv is the Replica of a process that StartProcess started: a
// replica binary's main calls it, runs the operator's RunFunc with it and
// closes r.Recorder at the end. It fails when the process was not started
// by StartProcess.
func ReplicaFromEnv() (Replica, error) {
	raw := os.Getenv(envOptions)
	if raw == "" {
		return Replica{}, fmt.Errorf("kshardtest: %s must be set: run this binary through kshardtest's Env.StartProcess", envOptions)
	}
	var o processOptions
	if err := json.Unmarshal([]byte(raw), &o); err != nil {
		return Replica{}, fmt.Errorf("kshardtest: %s: %w", envOptions, err)
	}
	cfg, err := manager.GetConfig()
	if err != nil {
		return Replica{}, err
	}
	rec, err := recorder.OpenFromEnv()
	if err != nil {
		return Replica{}, fmt.Errorf("kshardtest: %w", err)
	}
	return Replica{
		Identity:    o.Identity,
		Incarnation: rec.Process().Incarnation,
		Config:      cfg,
		Options: manager.Options{
			Ring: o.Ring, LeaseNamespace: o.LeaseNamespace, Identity: o.Identity, WatchNamespace: o.WatchNamespace,
			LeaseDuration: o.LeaseDuration, RenewPeriod: o.RenewPeriod, RenewDeadline: o.RenewDeadline, DrainGracePeriod: o.DrainGracePeriod,
			GracefulShutdownTimeout: o.GracefulShutdownTimeout, KeepPlaceOnLeave: o.KeepPlaceOnLeave,
			MetricsBindAddress: o.MetricsBindAddress, HealthProbeBindAddress: o.HealthProbeBindAddress,
		},
		Recorder: &Recorder{w: rec},
	}, nil
}

// build holds one test binary's builds, by package.
var build struct {
	mu   sync.Mutex
	bins map[string]string
}

// Build compiles the main package pkg (an import path or a directory, as go
// build takes it, resolved in the current directory's module) into t's
// temporary directory and returns the executable's path, for Command.Path.
// Later calls for pkg reuse the binary while it exists.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	build.mu.Lock()
	defer build.mu.Unlock()
	if bin, ok := build.bins[pkg]; ok {
		if _, err := os.Stat(bin); err == nil {
			return bin
		}
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is needed to build %s: %v", pkg, err)
	}
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	if out, err := exec.Command(goTool, "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, err, out)
	}
	if build.bins == nil {
		build.bins = map[string]string{}
	}
	build.bins[pkg] = bin
	return bin
}

func randomID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Exited says whether identity's latest run has ended by itself or by a
// fault (not running, and not winding down after Crash). A replica paused
// past its renew deadline with reconciles in flight exits on Resume, as
// the manager's fence demands; a test restarts it as its Pod's kubelet
// would.
func (e *Env) Exited(identity string) bool {
	e.mu.Lock()
	m := e.replicas[identity]
	e.mu.Unlock()
	return m != nil && !m.alive()
}
