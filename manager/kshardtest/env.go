package kshardtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kshard/kshard/internal/recorder"
	"github.com/kshard/kshard/manager"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
	"github.com/kshard/kshard/shard/ringstatus"
)

// Options configure an Env. The zero value is usable; defaults are applied
// in withDefaults.
type Options struct {
	// Ring names the ring the replicas join. Defaults to "kshardtest".
	Ring string
	// Namespace holds the ring's Leases and the kit's ConfigMaps; New
	// creates it. Defaults to "kshardtest".
	Namespace string
	// LeaseDuration, RenewPeriod, RenewDeadline and DrainGracePeriod go into
	// every Replica's manager options. Default to 4s, 500ms, 2600ms and 2s:
	// short, so that a crash fails over within a test.
	LeaseDuration, RenewPeriod, RenewDeadline, DrainGracePeriod time.Duration
	// StopTimeout bounds Stop's wait for a graceful leave before the test
	// fails. Defaults to 45s (the manager's shutdown timeout is 30s).
	StopTimeout time.Duration
	// KeepPlaceOnLeave goes into every Replica's manager options: a
	// stopped replica's partitions wait for its next incarnation instead
	// of moving (manager.Options.KeepPlaceOnLeave).
	KeepPlaceOnLeave bool
	// ControlPlane configures the control plane (e.g. ControllerManager:
	// true for garbage collection).
	ControlPlane controlplane.Options
	// LivenessBound is how long after its acknowledgement every update of
	// the kit's writer must have been reconciled at its generation (or a
	// later one) for Check to pass; a fault the Env injected extends it
	// for the updates it overlaps by its length: a Pause until Resume, an
	// outage (StopAPIServer) until InformerRecovery after StartAPIServer,
	// a Crash by LeaseDuration.
	// Defaults to LeaseDuration + DrainGracePeriod + LivenessAllowance: a
	// crashed owner's Lease waited out, or a leaving owner's drain, and
	// the new owner's start on the partition. Set it longer for an
	// operator whose reconciles take long or cannot keep up with the
	// writer's rate.
	LivenessBound time.Duration
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if o.Ring == "" {
		o.Ring = "kshardtest"
	}
	if o.Namespace == "" {
		o.Namespace = "kshardtest"
	}
	def(&o.LeaseDuration, 4*time.Second)
	def(&o.RenewPeriod, 500*time.Millisecond)
	def(&o.RenewDeadline, 2600*time.Millisecond)
	def(&o.DrainGracePeriod, 2*time.Second)
	def(&o.StopTimeout, 45*time.Second)
	def(&o.LivenessBound, o.LeaseDuration+o.DrainGracePeriod+LivenessAllowance)
	return o
}

// Env is one test's control plane, replicas and records. Its methods fail
// the test on errors and must be called from the test's goroutine.
type Env struct {
	t      testing.TB
	opts   Options
	cp     *controlplane.ControlPlane
	client kubernetes.Interface
	dir    string           // records/ and logs/
	events *recorder.Writer // the kit's own records: term, kill, exit

	mu       sync.Mutex                // guards the fields below
	replicas map[string]*member        // each identity's latest run
	all      []*member                 // every run, for cleanup
	frozen   map[recorder.Process]bool // process runs Pause froze
	// pausedAt is when Pause froze each identity, until Resume records
	// the pause as a fault; apiDownAt when StopAPIServer stopped the API
	// server (zero while it runs).
	pausedAt  map[string]time.Time
	apiDownAt time.Time
}

// New starts a control plane for t, creates Options.Namespace and a
// directory for records and logs. When the test ends every replica still
// running is stopped and waited for, and the control plane stopped; records,
// logs and control-plane files are kept (and named) if the test failed.
func New(t testing.TB, opts Options) *Env {
	t.Helper()
	return NewOn(t, controlplane.ForTest(t, opts.ControlPlane), opts)
}

// NewOn is New on a control plane the caller started and stops (one shared
// by a package's tests, say); Options.ControlPlane is not used.
func NewOn(t testing.TB, cp *controlplane.ControlPlane, opts Options) *Env {
	t.Helper()
	opts = opts.withDefaults()
	dir, err := os.MkdirTemp("", "kshardtest-")
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"records", "logs"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	events, err := recorder.OpenNamed(filepath.Join(dir, "records"), "kshardtest")
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cp.Config())
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{t: t, opts: opts, cp: cp, client: client, dir: dir, events: events, replicas: map[string]*member{}, frozen: map[recorder.Process]bool{}, pausedAt: map[string]time.Time{}}
	t.Cleanup(e.cleanup)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opts.Namespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", opts.Namespace, err)
	}
	return e
}

func (e *Env) cleanup() {
	e.mu.Lock()
	list := append([]*member(nil), e.all...)
	e.mu.Unlock()
	// Replicas still running leave gracefully, which is quicker than
	// waiting out their Leases; crashed ones are waited for.
	for _, m := range list {
		if m.alive() {
			if err := m.stop(e.opts.StopTimeout); err != nil {
				e.t.Errorf("stopping %s at the end of the test: %v", m.identity, err)
				m.crash()
			}
		}
	}
	for _, m := range list {
		if err := m.wait(e.opts.StopTimeout); err != nil {
			e.t.Errorf("%s at the end of the test: %v", m.identity, err)
		}
	}
	_ = e.events.Close()
	if e.t.Failed() {
		e.t.Logf("kshardtest: records and replica logs kept in %s", e.dir)
		return
	}
	_ = os.RemoveAll(e.dir)
}

// Options returns the options with defaults applied.
func (e *Env) Options() Options { return e.opts }

// ControlPlane is the test's control plane.
func (e *Env) ControlPlane() *controlplane.ControlPlane { return e.cp }

// Config is an admin rest config for the control plane.
func (e *Env) Config() *rest.Config { return e.cp.Config() }

// Client is an admin client for the control plane.
func (e *Env) Client() kubernetes.Interface { return e.client }

// Dir is the test's directory, holding records/ and logs/ and whatever
// else the test keeps there; removed at the end unless the test failed.
func (e *Env) Dir() string { return e.dir }

// RecordDir is where every replica, the writer and the kit record.
func (e *Env) RecordDir() string { return filepath.Join(e.dir, "records") }

// logDir holds the replicas' logs.
func (e *Env) logDir() string { return filepath.Join(e.dir, "logs") }

// managerOptions are the manager options a replica named identity gets:
// the ring, namespace, identity, timings and KeepPlaceOnLeave of the Env, the namespace as
// WatchNamespace (clear it for PartitionBy namespace, which refuses one), a
// 10s GracefulShutdownTimeout, and probe and metrics servers on free
// loopback ports.
func (e *Env) managerOptions(identity string) manager.Options {
	return manager.Options{
		Ring:             e.opts.Ring,
		LeaseNamespace:   e.opts.Namespace,
		Identity:         identity,
		WatchNamespace:   e.opts.Namespace,
		LeaseDuration:    e.opts.LeaseDuration,
		RenewPeriod:      e.opts.RenewPeriod,
		RenewDeadline:    e.opts.RenewDeadline,
		DrainGracePeriod: e.opts.DrainGracePeriod,
		KeepPlaceOnLeave: e.opts.KeepPlaceOnLeave,
		// Short, so that a replica crashed in this process, whose
		// connection is cut, gives up releasing its Leases soon.
		GracefulShutdownTimeout: 10 * time.Second,
		MetricsBindAddress:      "127.0.0.1:0",
		HealthProbeBindAddress:  "127.0.0.1:0",
	}
}

// StopAPIServer stops kube-apiserver (etcd keeps running): every replica
// loses the API server at once. StartAPIServer brings it back.
func (e *Env) StopAPIServer() time.Time {
	began := time.Now()
	e.cp.StopAPIServer()
	e.mu.Lock()
	e.apiDownAt = began
	e.mu.Unlock()
	return time.Now()
}

// StartAPIServer restarts kube-apiserver after StopAPIServer, on the same
// address, and waits until it serves. It records the outage as a fault
// that ends InformerRecovery after the server came back: the informers'
// backoff may keep the replicas from seeing updates that long.
func (e *Env) StartAPIServer() time.Time {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.cp.StartAPIServer(ctx); err != nil {
		e.t.Fatalf("restarting kube-apiserver: %v", err)
	}
	back := time.Now()
	e.mu.Lock()
	down := e.apiDownAt
	e.apiDownAt = time.Time{}
	e.mu.Unlock()
	if !down.IsZero() {
		if err := e.events.Fault("API server outage", down, back.Add(InformerRecovery(back.Sub(down)))); err != nil {
			e.t.Fatal(err)
		}
	}
	return back
}

// Ring reads the ring from its Leases.
func (e *Env) Ring() ringstatus.Ring {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := ringstatus.Read(ctx, e.client, e.opts.Namespace, e.opts.Ring)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// AwaitConverged waits until the ring has converged on exactly identities
// (see ringstatus.Ring.Converged) and fails the test with the last reason
// after timeout.
func (e *Env) AwaitConverged(timeout time.Duration, identities ...string) {
	e.t.Helper()
	e.await(timeout, fmt.Sprintf("the ring to converge on %v", identities), func(ctx context.Context) error {
		if err := e.exitedAmong(identities); err != nil {
			return err
		}
		r, err := ringstatus.Read(ctx, e.client, e.opts.Namespace, e.opts.Ring)
		if err != nil {
			return err
		}
		return r.Converged(identities...)
	})
}

// await polls cond every 100ms until it returns nil; after timeout it fails
// the test naming what it waited for and cond's last error.
func (e *Env) await(timeout time.Duration, what string, cond func(context.Context) error) {
	e.t.Helper()
	last := errors.New("not checked yet")
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := cond(cctx); err != nil {
			last = err
			// A replica that ended by itself will not converge: say why
			// now rather than after the timeout.
			return false, stopAwait(err)
		}
		return true, nil
	})
	if errors.Is(err, errEnded) {
		e.t.Fatalf("waiting for %s: %v", what, last)
	}
	if err != nil {
		e.t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, last)
	}
}

// errEnded marks a wait that cannot succeed because a replica it needs has
// exited on its own.
var errEnded = errors.New("a replica ended")

func stopAwait(err error) error {
	if errors.Is(err, errEnded) {
		return err
	}
	return nil
}

// exitedAmong returns an errEnded error naming the first of identities
// whose latest run ended by itself (not by Crash or Stop), with the end of
// its log.
func (e *Env) exitedAmong(identities []string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range identities {
		m := e.replicas[id]
		if m == nil || m.crashed || m.stopped || m.running() {
			continue
		}
		return fmt.Errorf("%w: %s exited%s", errEnded, id, m.endReport())
	}
	return nil
}
