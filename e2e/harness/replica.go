package harness

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/kshard/kshard/e2e/controlplane"
	"github.com/kshard/kshard/e2e/recorder"
)

// Replica is one run (incarnation) of a replica process.
type Replica struct {
	Identity string
	// Process names this run in the records.
	Process recorder.Process
	// ProbeAddr and MetricsAddr are where the replica serves /readyz and
	// /metrics.
	ProbeAddr, MetricsAddr string
	// LogPath is the replica's stdout and stderr.
	LogPath string

	cmd    *exec.Cmd
	exited chan struct{} // closed once the process is reaped and exit is set
	exit   Exit
	// signalled is when Stop or Kill signalled this run; zero if neither
	// did. Set and read on the test's goroutine.
	signalled time.Time
}

// Exited reports how the run ended, once it has. Exit.Signalled is zero
// when the process exited by itself rather than by Stop or Kill.
func (r *Replica) Exited() (Exit, bool) {
	select {
	case <-r.exited:
		exit := r.exit
		exit.Signalled = r.signalled
		return exit, true
	default:
		return Exit{}, false
	}
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

func (r *Replica) running() bool {
	select {
	case <-r.exited:
		return false
	default:
		return true
	}
}

// Start starts a new incarnation of identity, which must not be running.
// It does not wait for readiness; see WaitReady.
func (h *Harness) Start(identity string) *Replica {
	h.t.Helper()
	h.mu.Lock()
	prev := h.replicas[identity]
	h.mu.Unlock()
	if prev != nil && prev.running() {
		h.t.Fatalf("start %s: it is already running (incarnation %s)", identity, prev.Process.Incarnation)
	}
	ports, err := controlplane.FreePorts(2)
	if err != nil {
		h.t.Fatal(err)
	}
	r := &Replica{
		Identity:    identity,
		Process:     recorder.Process{Replica: identity, Incarnation: randomID()},
		ProbeAddr:   net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		MetricsAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])),
		exited:      make(chan struct{}),
	}
	r.LogPath = filepath.Join(h.dir, "logs", identity+"-"+r.Process.Incarnation+".log")
	logFile, err := os.OpenFile(r.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		h.t.Fatal(err)
	}
	o := h.opts
	kubeconfig := h.cp.KubeconfigPath()
	if o.Proxies {
		px, err := h.proxyFor(identity)
		if err != nil {
			logFile.Close()
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
		"--probe-addr=" + r.ProbeAddr,
		"--metrics-addr=" + r.MetricsAddr,
	}
	if o.IgnoreCancel {
		args = append(args, "--ignore-cancel")
	}
	if o.BlindWrite {
		args = append(args, "--blind-write")
	}
	r.cmd = exec.Command(h.bin, args...)
	r.cmd.Env = append(os.Environ(), "POD_NAME="+identity, "POD_NAMESPACE="+o.Namespace)
	r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
	// Its own process group, so Kill ends anything it spawned; Pdeathsig
	// ends it if the test binary dies without running its cleanups.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		logFile.Close()
		h.t.Fatalf("starting %s: %v", identity, err)
	}
	r.exit.Process = r.Process
	// This goroutine is owned by the Replica: every path that ends the
	// process (Stop, Kill, cleanup) waits for exited.
	go func() {
		_ = r.cmd.Wait()
		logFile.Close()
		r.exit.Exited = time.Now()
		r.exit.Code = r.cmd.ProcessState.ExitCode()
		_ = h.events.Append(recorder.Record{Kind: recorder.KindExit, Process: r.Process, At: r.exit.Exited.UnixNano(), Code: r.exit.Code})
		close(r.exited)
	}()
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
	client := &http.Client{Timeout: time.Second}
	err := await(h.opts.ReadyTimeout, 50*time.Millisecond, func() error {
		if !r.running() {
			return fmt.Errorf("exited with code %d", r.exit.Code)
		}
		resp, err := client.Get("http://" + r.ProbeAddr + "/readyz")
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
		h.t.Fatalf("%s not ready within %s: %v\nlast log lines (%s):\n%s", identity, h.opts.ReadyTimeout, err, r.LogPath, controlplane.TailFile(r.LogPath, 30))
	}
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
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(h.opts.StopTimeout):
		r.kill()
		h.t.Fatalf("%s did not exit within %s of SIGTERM; killed it\nlast log lines (%s):\n%s", identity, h.opts.StopTimeout, r.LogPath, controlplane.TailFile(r.LogPath, 30))
	}
	exit := r.exit
	exit.Signalled = at
	if exit.Code != 0 {
		h.t.Errorf("%s exited with code %d after SIGTERM, want 0\nlast log lines (%s):\n%s", identity, exit.Code, r.LogPath, controlplane.TailFile(r.LogPath, 30))
	}
	return exit
}

// Kill sends SIGKILL to identity's process group, as a crash, and waits until
// it is dead. The checker ends the reconciles it cut short at Exit.Exited.
func (h *Harness) Kill(identity string) Exit {
	h.t.Helper()
	r := h.mustRunning("kill", identity)
	at := time.Now()
	r.signalled = at
	_ = h.events.Append(recorder.Record{Kind: recorder.KindKill, Process: r.Process, At: at.UnixNano()})
	r.kill()
	exit := r.exit
	exit.Signalled = at
	return exit
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
func (r *Replica) kill() {
	if r.running() {
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-r.exited
}

func randomID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}
