package crshard

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	crmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kcontroller "github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/shard"
)

// unreachable is a rest config nothing in these tests connects to.
func unreachable() *rest.Config { return &rest.Config{Host: "https://127.0.0.1:1"} }

func newTestRing(t *testing.T, grace time.Duration) *Ring {
	t.Helper()
	r, err := New(unreachable(), Options{Ring: "test", LeaseNamespace: "ns", Identity: "r-0", DrainGracePeriod: grace, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	valid := shard.Validity{Until: time.Now().Add(time.Hour), Epoch: 1}
	r.validity = func() shard.Validity { return valid }
	return r
}

func newTestManager(t *testing.T, leaderElection bool) crmanager.Manager {
	t.Helper()
	mgr, err := crmanager.New(unreachable(), crmanager.Options{
		LeaderElection: leaderElection, LeaderElectionID: "x", LeaderElectionNamespace: "ns",
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

func req(name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
}

// only returns the set holding just the partition of each of reqs.
func (r *Ring) only(reqs ...reconcile.Request) shard.PartitionSet {
	set := shard.NewPartitionSet(r.parts.Count())
	for _, q := range reqs {
		set.Add(r.parts.Of(q.Namespace, q.Name))
	}
	return set
}

// twoPartitions returns two requests in different partitions.
func twoPartitions(r *Ring) (a, b reconcile.Request) {
	a = req("a")
	for i := 0; ; i++ {
		b = req("b" + strings.Repeat("x", i))
		if r.parts.Of(b.Namespace, b.Name) != r.parts.Of(a.Namespace, a.Name) {
			return a, b
		}
	}
}

func newQueue(r *Ring, usePQ bool) (*sharded, *gatedQueue) {
	c := &sharded{ring: r, working: make(chan struct{})}
	opts := c.options(controller.Options{}, usePQ)
	q := opts.NewQueue("test", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()).(*gatedQueue)
	return c, q
}

func TestGateAtEnqueueKeepsThePriorityQueue(t *testing.T) {
	for _, usePQ := range []bool{true, false} {
		r := newTestRing(t, time.Second)
		_, q := newQueue(r, usePQ)
		defer q.ShutDown()
		if (q.pq != nil) != usePQ {
			t.Fatalf("usePQ=%v: inner priority queue = %v", usePQ, q.pq != nil)
		}
		a, b := twoPartitions(r)
		if err := r.admit(context.Background(), r.only(a)); err != nil {
			t.Fatal(err)
		}
		q.Add(b)
		q.AddWithOpts(priorityqueue.AddOpts{}, a, b)
		q.AddRateLimited(b)
		q.AddAfter(b, 0)
		if n := q.Len(); n != 1 {
			t.Fatalf("usePQ=%v: queue holds %d requests, want 1 (only a's partition is active)", usePQ, n)
		}
		got, shutdown := q.Get()
		if shutdown || got != a {
			t.Fatalf("usePQ=%v: Get = %v, %v; want %v", usePQ, got, shutdown, a)
		}
		if n := r.gate.TotalInFlight(); n != 1 { // a's, the only request
			t.Fatalf("usePQ=%v: %d in flight after Get, want 1", usePQ, n)
		}
		q.Done(a)
		if n := r.gate.TotalInFlight(); n != 0 {
			t.Fatalf("usePQ=%v: %d in flight after Done", usePQ, n)
		}
	}
}

// TestRevokeDrainsAndCancels: a queued request of a revoked partition is
// dropped when dequeued; Revoke waits for the reconcile in flight, cancels
// its context after the grace period, and returns once it is Done.
func TestRevokeDrainsAndCancels(t *testing.T) {
	r := newTestRing(t, 50*time.Millisecond)
	c, q := newQueue(r, true)
	defer q.ShutDown()
	a, b := twoPartitions(r)
	both := r.only(a, b)
	if err := r.admit(context.Background(), both); err != nil {
		t.Fatal(err)
	}
	q.Add(a)
	got, _ := q.Get()
	if got != a {
		t.Fatalf("Get = %v, want %v", got, a)
	}
	started := make(chan struct{})
	var sawValidity bool
	rec := c.reconciler(reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
		_, sawValidity = kcontroller.ValidUntil(ctx)
		close(started)
		<-ctx.Done() // a reconcile that honours cancellation
		return reconcile.Result{}, ctx.Err()
	}))
	done := make(chan struct{})
	var returned atomic.Bool // the reconcile returned; its Done follows
	go func() {
		defer close(done)
		_, _ = rec.Reconcile(context.Background(), a)
		returned.Store(true)
		q.Done(a)
	}()
	<-started
	if !sawValidity {
		t.Fatal("the reconcile context carries no lease validity")
	}
	q.Add(b) // queued, then revoked before it is dequeued
	revoked := make(chan error, 1)
	go func() { revoked <- r.revoke(context.Background(), both, false) }()
	// Revoke may return the moment the reconcile's Done ends its count in
	// flight, before done is closed, but never before the reconcile
	// returned.
	var err error
	select {
	case err = <-revoked:
		if !returned.Load() {
			t.Fatalf("Revoke returned %v while a reconcile was in flight", err)
		}
		<-done
	case <-done:
		err = <-revoked
	case <-time.After(10 * time.Second):
		t.Fatal("the reconcile was not cancelled after the grace period")
	}
	if err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	q.Add(a)
	if n := q.Len(); n != 1 {
		t.Fatalf("queue holds %d, want only b, queued before the revoke", n)
	}
	// A Get with nothing active dequeues b and must drop it, not hand it
	// out. Shown by order, not by waiting: once b is dequeued, a's
	// partition is admitted again and a queued after b; the first request
	// Get hands out must be a.
	next := make(chan reconcile.Request, 1)
	go func() {
		item, _ := q.Get()
		next <- item
	}()
	waitUntil(t, 10*time.Second, "b dequeued", func() bool { return q.Len() == 0 })
	if err := r.admit(context.Background(), r.only(a)); err != nil {
		t.Fatal(err)
	}
	q.Add(a)
	if item := <-next; item != a {
		t.Fatalf("Get handed out %v, want %v: b's partition was revoked before it was dequeued", item, a)
	}
	q.Done(a)
	if n := q.Len(); n != 0 {
		t.Fatalf("queue holds %d after a was handed out, want 0 (b dropped)", n)
	}
}

func TestReconcileRefusedWhenLeaseValidityPassed(t *testing.T) {
	r := newTestRing(t, time.Second)
	c, q := newQueue(r, true)
	defer q.ShutDown()
	a := req("a")
	_ = r.admit(context.Background(), r.only(a))
	r.validity = func() shard.Validity { return shard.Validity{Until: time.Now().Add(-time.Second)} }
	ran := false
	res, err := c.reconciler(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		ran = true
		return reconcile.Result{}, nil
	})).Reconcile(context.Background(), a)
	if ran || err != nil || res.RequeueAfter == 0 {
		t.Fatalf("ran=%v res=%+v err=%v; want not run and requeued", ran, res, err)
	}
}

func TestRefusedSetups(t *testing.T) {
	t.Run("two rings", func(t *testing.T) {
		mgr := newTestManager(t, false)
		if err := newTestRing(t, 0).SetupWithManager(mgr); err != nil {
			t.Fatal(err)
		}
		if err := newTestRing(t, 0).SetupWithManager(mgr); err == nil || !strings.Contains(err.Error(), "already has a ring") {
			t.Fatalf("err = %v, want the second ring refused", err)
		}
	})
	t.Run("controller after start", func(t *testing.T) {
		mgr := newTestManager(t, false)
		r := newTestRing(t, 0)
		noop := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })
		if err := r.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Complete(noop); err != nil {
			t.Fatal(err)
		}
		r.mu.Lock()
		r.started = true
		r.mu.Unlock()
		err := r.NewControllerManagedBy(mgr).Named("late").For(&corev1.Secret{}).Complete(noop)
		if err == nil || !strings.Contains(err.Error(), "after the ring started") {
			t.Fatalf("err = %v, want the late controller refused", err)
		}
	})
	t.Run("bad options", func(t *testing.T) {
		_, err := New(unreachable(), Options{LeaseNamespace: "Bad_NS", Namespace: "other", Identity: "Pod 0", RenewPeriod: time.Minute, CacheCheckInterval: time.Millisecond, Registerer: prometheus.NewRegistry()})
		for _, want := range []string{"Ring is empty", `LeaseNamespace "Bad_NS" is not a namespace name`, `Namespace "other" (deprecated) and LeaseNamespace "Bad_NS" differ`, `Identity "Pod 0" is not a DNS-1123 subdomain`, "RenewPeriod (1m0s) must be less than RenewDeadline", "CacheCheckInterval 1ms is below a second"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("err = %v, want it to say %q", err, want)
			}
		}
		if _, err := New(nil, Options{}); err == nil {
			t.Fatal("New(nil config) succeeded")
		}
	})
}

// TestReplayEnqueuesCachedObjectsOfActivatedPartitionsAtLowPriority: the
// cached For objects of the replayed partitions are enqueued, below a live
// event's priority, and nothing of other partitions.
func TestReplayEnqueuesCachedObjectsOfActivatedPartitionsAtLowPriority(t *testing.T) {
	r := newTestRing(t, time.Second)
	c, q := newQueue(r, true)
	defer q.ShutDown()
	list, err := listFunc(&corev1.ConfigMap{}, clientgoscheme.Scheme, false)
	if err != nil {
		t.Fatal(err)
	}
	c.forList = list
	a, b := twoPartitions(r)
	live := req("live")
	for r.parts.Of(live.Namespace, live.Name) != r.parts.Of(a.Namespace, a.Name) {
		live.Name += "x"
	}
	var objs []client.Object
	for _, q := range []reconcile.Request{a, b} {
		objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: q.Namespace, Name: q.Name}})
	}
	cache := fake.NewClientBuilder().WithObjects(objs...).Build()
	set := r.only(a)
	if err := r.admit(context.Background(), set); err != nil {
		t.Fatal(err)
	}
	if err := c.replay(context.Background(), cache, set); err != nil {
		t.Fatal(err)
	}
	q.Add(live) // a live event, after the replay, at the default priority
	if n := q.Len(); n != 2 {
		t.Fatalf("queue holds %d requests, want 2 (a replayed, the live event; b's partition is not active)", n)
	}
	first, prio, _ := q.GetWithPriority()
	if first != live || prio != 0 {
		t.Fatalf("first out: %v at priority %d, want the live event %v at 0", first, prio, live)
	}
	q.Done(first)
	second, prio, _ := q.GetWithPriority()
	if second != a || prio != handler.LowPriority {
		t.Fatalf("second out: %v at priority %d, want the replayed %v at %d", second, prio, a, handler.LowPriority)
	}
	q.Done(second)
}

// TestDrainWaitsForAReconcilerThatIgnoresCancellation: Revoke never
// reports a drain while a reconcile runs, even one that ignores its
// cancelled context; it returns once that reconcile returns.
func TestDrainWaitsForAReconcilerThatIgnoresCancellation(t *testing.T) {
	r := newTestRing(t, 10*time.Millisecond)
	c, q := newQueue(r, true)
	defer q.ShutDown()
	a := req("a")
	set := r.only(a)
	_ = r.admit(context.Background(), set)
	q.Add(a)
	got, _ := q.Get()
	started, release, cancelled := make(chan struct{}), make(chan struct{}), make(chan struct{})
	rec := c.reconciler(reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
		close(started)
		<-ctx.Done()
		close(cancelled)
		<-release // ignores the cancellation
		return reconcile.Result{}, nil
	}))
	var returned atomic.Bool // the reconcile returned; its Done follows
	go func() {
		_, _ = rec.Reconcile(context.Background(), got)
		returned.Store(true)
		q.Done(got)
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := r.revoke(ctx, set, false); err == nil {
		t.Fatal("Revoke reported the drain complete while the reconcile ran")
	}
	<-cancelled // the grace period passed: its context was cancelled
	// A Revoke whose context ends while the reconcile runs reports the
	// drain unfinished however long it waited: state, not a timed window.
	ended, end := context.WithCancel(context.Background())
	end()
	if err := r.revoke(ended, set, true); err == nil {
		t.Fatal("Revoke with its context ended reported the drain complete while the reconcile ran")
	}
	// One that waits returns after the reconcile returned, and with
	// nothing in flight (a's is the test's only reconcile): the order is
	// recorded.
	done := make(chan error, 1)
	var returnedFirst atomic.Bool
	go func() {
		err := r.revoke(context.Background(), set, true)
		returnedFirst.Store(returned.Load() && r.gate.TotalInFlight() == 0)
		done <- err
	}()
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Revoke after the reconcile returned: %v", err)
	}
	if !returnedFirst.Load() {
		t.Fatal("Revoke returned before the reconcile it drained had returned and was Done")
	}
}

// TestOptionsForControllerNew: a controller built with controller.New opts
// in through Ring.Options: its queue is the gated one and its reconciler
// is wrapped, so a reconcile of an inactive partition does not run.
func TestOptionsForControllerNew(t *testing.T) {
	mgr := newTestManager(t, false)
	r := newTestRing(t, 0)
	ran := false
	opts, err := r.Options(mgr, controller.Options{Reconciler: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		ran = true
		return reconcile.Result{}, nil
	})}, &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := controller.New("viaoptions", mgr, opts); err != nil {
		t.Fatal(err)
	}
	q, ok := opts.NewQueue("viaoptions", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()).(*gatedQueue)
	if !ok || q.pq == nil {
		t.Fatalf("NewQueue built %T (priority queue inside: %v), want the gated priority queue", q, ok && q.pq != nil)
	}
	q.ShutDown()
	if _, err := opts.Reconciler.Reconcile(context.Background(), req("a")); err != nil || ran {
		t.Fatalf("reconcile of an inactive partition: ran=%v err=%v, want not run", ran, err)
	}
}

// TestSingletonRidesItsPartition: a singleton starts when its partition is
// admitted, and Revoke returns only after it stopped; it cannot be added
// twice or after the ring started.
func TestSingletonRidesItsPartition(t *testing.T) {
	r := newTestRing(t, time.Second)
	running := make(chan struct{}, 1)
	stopped := make(chan struct{}, 1)
	err := r.AddSingleton("gc", crmanager.RunnableFunc(func(ctx context.Context) error {
		running <- struct{}{}
		<-ctx.Done()
		stopped <- struct{}{}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.AddSingleton("gc", crmanager.RunnableFunc(func(context.Context) error { return nil })); err == nil {
		t.Fatal("a second singleton of the same name was accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.base = ctx // as Start sets it
	p := r.parts.Of("", shard.SingletonKey("gc"))
	set := shard.NewPartitionSet(r.parts.Count())
	other := (p + 1) % r.parts.Count()
	set.Add(other)
	_ = r.admit(context.Background(), set)
	// Admit starts a singleton before it returns: its run is state to read.
	if s := r.singletons[0]; s.running() {
		t.Fatal("the singleton started on another partition's activation")
	}
	set.Add(p)
	_ = r.admit(context.Background(), set)
	<-running
	if err := r.revoke(context.Background(), set, false); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopped:
	default:
		t.Fatal("Revoke returned before the singleton stopped")
	}
	r.started = true
	if err := r.AddSingleton("late", crmanager.RunnableFunc(func(context.Context) error { return nil })); err == nil {
		t.Fatal("a singleton added after the ring started was accepted")
	}
}

// running reports whether a run of s was started and not yet waited for.
func (s *singleton) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done != nil
}

// TestMetricsInTheGivenRegistry: the ring's, the Lease's and the gate's
// kshard_* metrics land in the registry the ring was given (by default
// controller-runtime's).
func TestMetricsInTheGivenRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, err := New(unreachable(), Options{Ring: "test", LeaseNamespace: "ns", Identity: "r-0", Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	_, q := newQueue(r, true)
	defer q.ShutDown()
	q.Add(req("a")) // counted as foreign: nothing is active
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range families {
		have[f.GetName()] = true
	}
	for _, name := range []string{"kshard_ring_members", "kshard_ready", "kshard_lease_renews_total", "kshard_gate_decisions_total",
		"kshard_ring_unclaimed_partitions", "kshard_ring_overlapping_partitions", "kshard_ring_malformed_leases",
		"kshard_ring_foreign_leases", "kshard_ring_oldest_pending_seconds", "kshard_drain_overdue_total"} {
		if !have[name] {
			t.Errorf("metric %s missing from the registry (have %v)", name, have)
		}
	}
	if _, err := New(unreachable(), Options{Ring: "test", LeaseNamespace: "ns", Identity: "r-1", Registerer: reg}); err == nil {
		t.Error("a second ring registered into the same registry without an error")
	}
}

// TestFailedBuildIsNotWaitedFor: a controller whose build fails is not
// registered, so the ring does not wait for its workers before joining.
func TestFailedBuildIsNotWaitedFor(t *testing.T) {
	mgr := newTestManager(t, false)
	r := newTestRing(t, 0)
	if err := r.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Complete(nil); err == nil {
		t.Fatal("Complete(nil) succeeded")
	}
	if n := len(r.controllers); n != 0 {
		t.Fatalf("%d controllers registered after a failed build, want 0", n)
	}
}

// The adapter's defaults come from where kshard's manager's come from: the
// Lease namespace and identity from the pod (lease), the timings from
// shard.Timing (RenewPeriod by its rule), and a shutdown timeout below
// controller-runtime's manager's own.
func TestDefaultsAreTheManagers(t *testing.T) {
	t.Setenv(lease.EnvPodNamespace, "from-pod")
	t.Setenv(lease.EnvPodName, "op-0")
	r, err := New(unreachable(), Options{Ring: "test", RenewDeadline: time.Second, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	o := r.opts
	if o.LeaseNamespace != "from-pod" || o.Identity != "op-0" {
		t.Errorf("LeaseNamespace %q, Identity %q; want $POD_NAMESPACE and $POD_NAME", o.LeaseNamespace, o.Identity)
	}
	// The deprecated Namespace, alone, still names the Leases' namespace,
	// as manager.Options.Namespace does.
	old, err := New(unreachable(), Options{Ring: "test", Namespace: "old", Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if old.opts.LeaseNamespace != "old" || old.opts.LeaderElectionNamespace != "old" {
		t.Errorf("deprecated Namespace: LeaseNamespace %q, LeaderElectionNamespace %q; want both %q", old.opts.LeaseNamespace, old.opts.LeaderElectionNamespace, "old")
	}
	want := shard.Timing{RenewDeadline: time.Second, GracefulShutdownTimeout: shard.DefaultEmbeddedShutdownTimeout}.WithDefaults()
	if o.LeaseDuration != want.LeaseDuration || o.RenewPeriod != 500*time.Millisecond || o.DrainGracePeriod != want.DrainGracePeriod {
		t.Errorf("LeaseDuration %v, RenewPeriod %v, DrainGracePeriod %v; want %v, 500ms (RenewDeadline/2), %v",
			o.LeaseDuration, o.RenewPeriod, o.DrainGracePeriod, want.LeaseDuration, want.DrainGracePeriod)
	}
	if crDefault := 30 * time.Second; o.GracefulShutdownTimeout >= crDefault {
		t.Errorf("GracefulShutdownTimeout %v; want it below controller-runtime's manager's default %v", o.GracefulShutdownTimeout, crDefault)
	}
}

// TestDrainOverdueNamesTheControllers: an overdue drain counts once for
// each controller with a reconcile of the drained partitions in flight,
// as kshard's own controllers count theirs (kshard_drain_overdue_total's
// controller label), and for no other.
func TestDrainOverdueNamesTheControllers(t *testing.T) {
	r := newTestRing(t, time.Second)
	a, b := twoPartitions(r)
	pa, pb := r.parts.Of(a.Namespace, a.Name), r.parts.Of(b.Namespace, b.Name)
	f1 := r.running.hold(pa, "widgets", func() {})
	f2 := r.running.hold(pa, "gadgets", func() {})
	f3 := r.running.hold(pb, "other", func() {})
	defer func() { r.running.release(f1); r.running.release(f2); r.running.release(f3) }()
	if got, want := r.running.controllers(r.only(a)), []string{"gadgets", "widgets"}; !slices.Equal(got, want) {
		t.Errorf("controllers in flight in a's partition: %v, want %v", got, want)
	}
	r.running.release(f2)
	if got, want := r.running.controllers(r.only(a)), []string{"widgets"}; !slices.Equal(got, want) {
		t.Errorf("after one returned: %v, want %v", got, want)
	}
	if got := r.running.controllers(shard.NewPartitionSet(r.parts.Count())); len(got) != 0 {
		t.Errorf("controllers of no partition: %v", got)
	}
}

// electedManager is a manager whose Elected channel the test controls.
type electedManager struct {
	crmanager.Manager
	elected chan struct{}
}

func (m *electedManager) Elected() <-chan struct{} { return m.elected }

// A manager that runs leader election closes Elected only on the replica
// that wins it: the ring waits for it before joining, and, past its wait,
// is not ready and says why; it joins once Elected closes. A manager with
// LeaderElection: true is accepted by SetupWithManager (controller-runtime
// exposes no getter for it), so that this is where it is caught.
func TestRingWaitsForElection(t *testing.T) {
	mgr := &electedManager{Manager: newTestManager(t, true), elected: make(chan struct{})}
	r := newTestRing(t, 0)
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatalf("SetupWithManager: %v", err)
	}
	r.electedWarnAfter = time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	result := make(chan bool, 1)
	go func() { result <- r.waitElected(ctx, mgr) }()
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return errors.Is(r.readyz(nil), errNotElected), nil
	})
	if err != nil {
		t.Fatalf("readyz never reported the missing election: last %v", r.readyz(nil))
	}
	if !strings.Contains(errNotElected.Error(), "LeaderElection false") {
		t.Errorf("the report %q does not name the fix", errNotElected)
	}
	close(mgr.elected)
	if ok := <-result; !ok {
		t.Fatal("waitElected = false after Elected closed, want true")
	}
	if errors.Is(r.readyz(nil), errNotElected) {
		t.Error("readyz still reports the missing election after it came")
	}

	// Stopped before an election: false, nothing joined.
	mgr2 := &electedManager{Manager: newTestManager(t, true), elected: make(chan struct{})}
	r2 := newTestRing(t, 0)
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if r2.waitElected(ctx2, mgr2) {
		t.Error("waitElected = true for a stopped context and no election")
	}
}

// A ring leaves the registry ControllerManagedBy reads when its Start
// returns, so a manager that has run is not kept alive by it.
func TestRingForgottenAfterStart(t *testing.T) {
	mgr := newTestManager(t, false)
	r := newTestRing(t, 0)
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if b := ControllerManagedBy(mgr); b.err != nil {
		t.Fatalf("ControllerManagedBy before start: %v", b.err)
	}
	forgetRing(mgr, newTestRing(t, 0)) // another ring's: no effect
	if b := ControllerManagedBy(mgr); b.err != nil {
		t.Fatalf("ControllerManagedBy after another ring's forget: %v", b.err)
	}
	forgetRing(mgr, r)
	if b := ControllerManagedBy(mgr); !errors.Is(b.err, errNoRing) {
		t.Fatalf("ControllerManagedBy after the ring's forget: err = %v, want errNoRing", b.err)
	}
}
