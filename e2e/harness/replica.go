package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/kshard/kshard/internal/process"
	"github.com/kshard/kshard/internal/recorder"
	"github.com/kshard/kshard/internal/testwait"
	"github.com/kshard/kshard/manager/kshardtest"
)

// Replica is one run (incarnation) of a replica process.
type Replica struct {
	Identity string
	// Process names this run in the records.
	Process recorder.Process
	// LogPath is the replica's stdout and stderr.
	LogPath string

	proc *process.Process
	// signalled is when Stop or Kill signalled this run; zero if neither
	// did. Set and read on the test's goroutine.
	signalled time.Time
}

// Exited reports how the run ended, once it has. Exit.Signalled is zero
// when the process exited by itself rather than by Stop or Kill.
func (r *Replica) Exited() (Exit, bool) {
	e, ok := r.proc.Exited()
	if !ok {
		return Exit{}, false
	}
	return r.exitOf(e), true
}

func (r *Replica) exitOf(e process.Exit) Exit {
	return Exit{Process: r.Process, Signalled: r.signalled, Exited: e.At, Code: e.Code}
}

// ServingAddr waits until the replica has bound server
// (process.ServerProbe or process.ServerMetrics) on the port the kernel
// chose and returns its address.
func (r *Replica) ServingAddr(ctx context.Context, server string) (string, error) {
	return r.proc.ServingAddr(ctx, server)
}

// Exit is how a replica process ended.
type Exit struct {
	Process recorder.Process
	// Signalled is when Stop or Kill sent its signal (zero if the process
	// exited by itself).
	Signalled time.Time
	// Exited is when the harness saw the process dead.
	Exited time.Time
	// Code is the exit code, -1 if a signal ended it.
	Code int
}

func (r *Replica) running() bool { return r.proc.Running() }

// Start starts a new incarnation of identity, which must not be running.
// It does not wait for readiness; see WaitReady. The replica binds its
// probe and metrics servers on port 0 and logs the addresses it got.
func (h *Harness) Start(identity string) *Replica {
	h.t.Helper()
	h.mu.Lock()
	prev := h.replicas[identity]
	h.mu.Unlock()
	if prev != nil && prev.running() {
		h.t.Fatalf("start %s: it is already running (incarnation %s)", identity, prev.Process.Incarnation)
	}
	r := &Replica{
		Identity: identity,
		Process:  recorder.Process{Replica: identity, Incarnation: randomID()},
	}
	r.LogPath = filepath.Join(h.dir, "logs", identity+"-"+r.Process.Incarnation+".log")
	o := h.opts
	kubeconfig := h.cp.KubeconfigPath()
	if o.Proxies {
		px, err := h.proxyFor(identity)
		if err != nil {
			h.t.Fatal(err)
		}
		kubeconfig = px.kubeconfig
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--ring=" + o.Ring,
		"--namespace=" + o.Namespace,
		"--identity=" + identity,
		"--incarnation=" + r.Process.Incarnation,
		"--record-dir=" + h.RecordDir(),
		"--work=" + o.Work.String(),
		"--workers=" + strconv.Itoa(o.Workers),
		"--partitions=" + strconv.Itoa(o.Partitions),
		"--lease-duration=" + o.LeaseDuration.String(),
		"--renew-period=" + o.RenewPeriod.String(),
		"--renew-deadline=" + o.RenewDeadline.String(),
		"--drain-grace=" + o.DrainGrace.String(),
		"--probe-addr=127.0.0.1:0",
		"--metrics-addr=127.0.0.1:0",
		"--cache-report-addr=127.0.0.1:0",
	}
	if o.Verbosity > 0 {
		args = append(args, "--v="+strconv.Itoa(o.Verbosity))
	}
	if o.PartitionBy != "" {
		args = append(args, "--partition-by="+o.PartitionBy)
	}
	if o.CacheMode != "" {
		args = append(args, "--cache-mode="+o.CacheMode)
	}
	if o.spread() {
		args = append(args, "--all-namespaces")
	}
	if o.Balance > 0 {
		args = append(args, "--balance="+strconv.FormatFloat(o.Balance, 'f', -1, 64))
	}
	if o.KeepPlace {
		args = append(args, "--keep-place-on-leave")
	}
	if o.IgnoreCancel {
		args = append(args, "--ignore-cancel")
	}
	if o.BlindWrite {
		args = append(args, "--blind-write")
	}
	if o.BackgroundWrite > 0 {
		args = append(args, "--background-write="+o.BackgroundWrite.String())
	}
	if o.Pods {
		args = append(args, h.preparePod(identity, r.Process.Incarnation)...)
	}
	proc, err := process.Start(process.Options{
		Name:    identity,
		Path:    h.bin,
		Args:    args,
		Env:     []string{"POD_NAME=" + identity, "POD_NAMESPACE=" + o.Namespace},
		LogPath: r.LogPath,
		// Recorded on the reaping goroutine, before anyone sees the exit.
		OnExit: func(e process.Exit) {
			_ = h.events.Append(recorder.Record{Kind: recorder.KindExit, Process: r.Process, At: e.At.UnixNano(), Code: e.Code})
		},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	r.proc = proc
	h.mu.Lock()
	h.replicas[identity] = r
	h.mu.Unlock()
	return r
}

// StartReady starts each identity, then waits until all are ready.
func (h *Harness) StartReady(identities ...string) {
	h.t.Helper()
	for _, id := range identities {
		h.Start(id)
	}
	for _, id := range identities {
		h.WaitReady(id)
	}
}

// WaitReady waits until identity's /readyz answers 200 (caches synced and
// joined the ring), failing the test if it exits first.
func (h *Harness) WaitReady(identity string) {
	h.t.Helper()
	r := h.mustRunning("wait for", identity)
	ctx, cancel := context.WithTimeout(context.Background(), h.opts.ReadyTimeout)
	defer cancel()
	probe, err := r.ServingAddr(ctx, process.ServerProbe)
	if err != nil {
		h.t.Fatalf("%s not ready within %s: %v", identity, h.opts.ReadyTimeout, err)
	}
	client := &http.Client{Timeout: time.Second}
	err = testwait.Poll(50*time.Millisecond, h.opts.ReadyTimeout, func() error {
		if e, done := r.proc.Exited(); done {
			return testwait.Stop(fmt.Errorf("%s", e)) // it will not become ready
		}
		resp, err := client.Get("http://" + probe + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz answered %s", resp.Status)
		}
		return nil
	})
	if err != nil {
		h.t.Fatalf("%s not ready: %v\nlast log lines (%s):\n%s", identity, err, r.LogPath, r.proc.Tail(30))
	}
}

// Readyz returns identity's /readyz?verbose answer: every check, and the
// information lines such as each kind's cache mode.
func (h *Harness) Readyz(ctx context.Context, identity string) (string, error) {
	r := h.Replica(identity)
	if r == nil || !r.running() {
		return "", fmt.Errorf("%s is not running", identity)
	}
	probe, err := r.ServingAddr(ctx, process.ServerProbe)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+probe+"/readyz?verbose", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// CacheReport returns the ConfigMaps identity's cache holds (the test
// operator's --cache-report-addr): for a sharded cache, those of the
// partitions it holds.
func (h *Harness) CacheReport(ctx context.Context, identity string) ([]kshardtest.CachedObject, error) {
	r := h.Replica(identity)
	if r == nil || !r.running() {
		return nil, fmt.Errorf("%s is not running", identity)
	}
	addr, err := r.ServingAddr(ctx, kshardtest.CacheReportServer)
	if err != nil {
		return nil, err
	}
	return kshardtest.ReadCacheReport(ctx, addr)
}

// Stop sends SIGTERM to identity and waits for it to exit, which it must do
// with code 0 after a graceful leave. A replica still running after
// StopTimeout is killed and the test fails.
func (h *Harness) Stop(identity string) Exit {
	h.t.Helper()
	r := h.mustRunning("stop", identity)
	at := time.Now()
	r.signalled = at
	_ = h.events.Append(recorder.Record{Kind: recorder.KindTerm, Process: r.Process, At: at.UnixNano()})
	e, err := r.proc.Stop(h.opts.StopTimeout)
	if err != nil {
		h.t.Fatalf("%v\nlast log lines (%s):\n%s", err, r.LogPath, r.proc.Tail(30))
	}
	exit := r.exitOf(e)
	if exit.Code != 0 {
		h.t.Errorf("%s exited with code %d after SIGTERM, want 0\nlast log lines (%s):\n%s", identity, exit.Code, r.LogPath, r.proc.Tail(30))
	}
	return exit
}

// Kill sends SIGKILL to identity's process group, as a crash, and waits until
// it is dead. The checker ends the reconciles it cut short at Exit.Exited.
// The kill is recorded as a fault lasting LeaseDuration, the dead process's
// Lease its peers (or its identity's next process) wait out: a write that
// waits across several failovers is allowed each one's (see
// recorder.Log.CheckWithin).
func (h *Harness) Kill(identity string) Exit {
	h.t.Helper()
	r := h.mustRunning("kill", identity)
	at := time.Now()
	r.signalled = at
	_ = h.events.Append(recorder.Record{Kind: recorder.KindKill, Process: r.Process, At: at.UnixNano()})
	_ = h.events.Fault("SIGKILL of "+r.Process.String(), at, at.Add(h.opts.LeaseDuration))
	return r.exitOf(r.proc.Kill())
}

// StopAll stops every running replica, one after another, highest identity
// first as a StatefulSet scales down.
func (h *Harness) StopAll() {
	h.t.Helper()
	live := h.Live()
	for i := len(live) - 1; i >= 0; i-- {
		h.Stop(live[i])
	}
}

func (h *Harness) mustRunning(verb, identity string) *Replica {
	h.t.Helper()
	r := h.Replica(identity)
	if r == nil || !r.running() {
		h.t.Fatalf("cannot %s %s: it is not running", verb, identity)
	}
	return r
}

// kill ends the process group at once and waits for the process to be
// reaped. Safe on a process that has exited.
func (r *Replica) kill() { r.proc.Kill() }

func randomID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}
