package harness

import (
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kshard/kshard/internal/recorder"
	"github.com/kshard/kshard/internal/testwait"
	"github.com/kshard/kshard/manager/kshardtest"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
	"github.com/kshard/kshard/shard"
)

// Options configure a Harness and the replicas it runs. The zero value is
// usable; defaults are applied in withDefaults.
type Options struct {
	// Ring names the ring. Defaults to "e2e".
	Ring string
	// Namespace holds the ring's Leases and the ConfigMaps the operator
	// reconciles; New creates it. Defaults to "kshard-e2e".
	Namespace string
	// Partitions is the ring's partition count. Defaults to
	// shard.DefaultPartitions.
	Partitions int
	// LeaseDuration, RenewPeriod, RenewDeadline and DrainGrace are passed to
	// every replica. Default to 4s, 500ms, 2600ms and 2s: short, so that
	// crash failovers fit in a test.
	LeaseDuration, RenewPeriod, RenewDeadline, DrainGrace time.Duration
	// Work is each reconcile's simulated duration. Defaults to 20ms.
	Work time.Duration
	// Workers is each replica's concurrent reconciles. Defaults to 4.
	Workers int
	// StopTimeout bounds Stop's wait for a graceful exit before it kills
	// the replica and fails the test. Defaults to 45s (the manager's
	// graceful shutdown timeout is 30s).
	StopTimeout time.Duration
	// ReadyTimeout bounds WaitReady. Defaults to 60s.
	ReadyTimeout time.Duration
	// Proxies routes every replica to the API server through a fault proxy
	// of its own (e2e/faultproxy), kept across restarts of its identity, so
	// a test can delay or cut one replica off; see Proxy. Defaults to
	// direct connections.
	Proxies bool
	// IgnoreCancel makes every reconcile run its full Work even when its
	// context is cancelled, as a reconciler that ignores cancellation does.
	// Defaults to false: a reconcile returns as soon as its context ends.
	IgnoreCancel bool
	// BlindWrite makes every reconcile that did its work patch its
	// ConfigMap's annotation without a resourceVersion precondition and
	// record the write just before sending it (recorder.KindSend); see
	// FinalValues and recorder.Log.CheckWrites. Defaults to false: the
	// operator writes nothing.
	BlindWrite bool
	// BackgroundWrite, when positive, makes every replica patch its own
	// ConfigMap (BackgroundName) every BackgroundWrite from a few
	// goroutines, with context.Background(): writes without a reconcile
	// context (the operator's --background-write). Defaults to 0: none.
	BackgroundWrite time.Duration
	// Pods gives every identity a Pod object and plays its kubelet (see
	// pods.go): each process writes its incarnation into a termination
	// message file of its own, which CrashInPlace reports in the pod's
	// status, so that replicas can prove a crashed process's death.
	// Defaults to false: no pods, and crash failover waits the Lease out.
	Pods bool
	// PartitionBy is every replica's --partition-by: "" or "key" (the
	// default), or "namespace": the objects are spread over namespaces
	// (ObjectNamespaces), with the sharded cache (give the control plane
	// the ShardedListAndWatch gate to have the API server filter).
	PartitionBy string
	// CacheMode is every replica's --cache-mode (manager.Options.CacheMode):
	// "full", "labels" (the gate-free sharded cache, by partition labels)
	// or "server". Defaults to "": the manager's default for PartitionBy.
	CacheMode string
	// Balance is every replica's --balance (with PartitionBy
	// "namespace"): partitions placed by object counts. 0: by number.
	Balance float64
	// KeepPlace gives every replica --keep-place-on-leave: a stopped
	// replica's partitions wait for its identity's next process
	// (manager.Options.KeepPlaceOnLeave). Defaults to false.
	KeepPlace bool
	// ObjectNamespaces, when positive, spreads the objects: CreateConfigMaps
	// creates them round robin in namespaces o0-<Namespace>, o1-… and the
	// replicas watch every namespace (--all-namespaces). The harness
	// deletes those objects when the test ends, after its replicas, so
	// that later tests on the same control plane do not reconcile or
	// label them. Defaults to 24 with PartitionBy "namespace", else 0: the
	// objects live in Namespace.
	ObjectNamespaces int
	// Verbosity is every replica's --v: 1 adds the ring's activations and
	// drains, why claimed partitions are not active yet, and the cache's
	// segments, views and self-checks to their logs. Defaults to 0.
	Verbosity int
}

// spread reports whether the objects live in namespaces of their own.
func (o Options) spread() bool { return o.ObjectNamespaces > 0 }

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if o.Ring == "" {
		o.Ring = "e2e"
	}
	if o.Namespace == "" {
		o.Namespace = "kshard-e2e"
	}
	if o.Partitions == 0 {
		o.Partitions = shard.DefaultPartitions
	}
	def(&o.LeaseDuration, 4*time.Second)
	def(&o.RenewPeriod, 500*time.Millisecond)
	def(&o.RenewDeadline, 2600*time.Millisecond)
	def(&o.DrainGrace, 2*time.Second)
	def(&o.Work, 20*time.Millisecond)
	def(&o.StopTimeout, 45*time.Second)
	def(&o.ReadyTimeout, 60*time.Second)
	if o.Workers == 0 {
		o.Workers = 4
	}
	if o.PartitionBy == "namespace" && o.ObjectNamespaces == 0 {
		o.ObjectNamespaces = 24
	}
	return o
}

// Harness runs replicas of the test operator for one test. Its methods that
// take no context fail the test on errors and must be called from the test's
// goroutine.
type Harness struct {
	t      testing.TB
	cp     *controlplane.ControlPlane
	opts   Options
	bin    string
	dir    string
	client kubernetes.Interface
	events *recorder.Writer // the harness's own records: term, kill, exit

	mu       sync.Mutex // guards replicas, proxies, pods and objects
	replicas map[string]*Replica
	proxies  map[string]*proxy    // by identity, with Options.Proxies
	pods     map[string]*podState // by identity, with Options.Pods
	objects  int                  // ConfigMaps CreateConfigMaps created
}

// New prepares a harness on cp: it builds the operator (once per test
// binary), creates the namespace and a directory for records and logs. At
// the end of the test every replica still running is killed and waited for;
// the directory is removed unless the test failed.
func New(t testing.TB, cp *controlplane.ControlPlane, opts Options) *Harness {
	t.Helper()
	opts = opts.withDefaults()
	bin, err := operatorBinary()
	if err != nil {
		t.Fatal(err)
	}
	// The kit's Env makes the namespace and the directory, and removes the
	// directory at the end unless the test failed; its cleanup runs after
	// the harness's, which is registered later.
	env := kshardtest.NewOn(t, cp, kshardtest.Options{Ring: opts.Ring, Namespace: opts.Namespace})
	events, err := recorder.OpenNamed(env.RecordDir(), "harness")
	if err != nil {
		t.Fatal(err)
	}
	h := &Harness{t: t, cp: cp, opts: opts, bin: bin, dir: env.Dir(), client: env.Client(), events: events, replicas: map[string]*Replica{}, proxies: map[string]*proxy{}, pods: map[string]*podState{}}
	t.Cleanup(h.cleanup)
	return h
}

func (h *Harness) cleanup() {
	h.mu.Lock()
	running := make([]*Replica, 0, len(h.replicas))
	for _, r := range h.replicas {
		running = append(running, r)
	}
	h.mu.Unlock()
	for _, r := range running {
		r.kill()
	}
	h.deleteSpreadObjects()
	h.closeProxies()
	_ = h.events.Close()
}

// Options returns the harness's options with defaults applied.
func (h *Harness) Options() Options { return h.opts }

// Client is an admin client of the control plane.
func (h *Harness) Client() kubernetes.Interface { return h.client }

// RecordDir is the directory every process records into; check it with
// recorder.Check.
func (h *Harness) RecordDir() string { return filepath.Join(h.dir, "records") }

// Log loads the records so far.
func (h *Harness) Log() *recorder.Log {
	h.t.Helper()
	log, err := recorder.Load(h.RecordDir())
	if err != nil {
		h.t.Fatalf("loading records: %v", err)
	}
	return log
}

// RecordFault records a fault the test injected that kept replicas from
// reconciling from start until end (see recorder.Writer.Fault): the
// liveness check (recorder.Log.CheckWithin) extends the allowance of the
// writes it overlaps by its length.
func (h *Harness) RecordFault(what string, start, end time.Time) {
	h.t.Helper()
	if err := h.events.Fault(what, start, end); err != nil {
		h.t.Fatal(err)
	}
}

// Identity is the StatefulSet-style name of replica i: r-<i>.
func Identity(i int) string { return fmt.Sprintf("r-%d", i) }

// Live lists the identities of the replicas running now, sorted.
func (h *Harness) Live() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for id, r := range h.replicas {
		if r.running() {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// Replica returns the current (or last) run of identity, or nil.
func (h *Harness) Replica(identity string) *Replica {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.replicas[identity]
}

// Await polls cond until it returns nil, failing the test with cond's last
// error after timeout.
func (h *Harness) Await(timeout time.Duration, what string, cond func() error) {
	h.t.Helper()
	testwait.NoError(h.t, 100*time.Millisecond, timeout, what, cond)
}
