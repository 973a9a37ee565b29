package controller

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	"github.com/kshard/kshard/internal/testwait"
	"github.com/kshard/kshard/shard"
)

const testP = 7

var testPartitioner = shard.NewPartitioner(testP)

func set(ps ...int) shard.PartitionSet { return shard.NewPartitionSet(testP, ps...) }

func partitionOf(r Request) int { return testPartitioner.Partition(r.Key()) }

func noop(context.Context, Request) (Result, error) { return Result{}, nil }

func TestStandaloneStartsAllActiveManagedStartsNone(t *testing.T) {
	all, err := New("all", ReconcilerFunc(noop), Options{Partitioner: testPartitioner, Registerer: newRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if !all.ActivePartitions().Equal(shard.FullPartitionSet(testP)) {
		t.Fatalf("standalone controller active = %s, want all", all.ActivePartitions())
	}
	none, _ := New("none", ReconcilerFunc(noop), Options{Partitioner: testPartitioner, StartInactive: true, Registerer: newRegistry()})
	if !none.ActivePartitions().IsEmpty() {
		t.Fatalf("StartInactive controller active = %s, want none", none.ActivePartitions())
	}
}

func TestGateAdmitsOnlyActivePartitions(t *testing.T) {
	calls := newCounter()
	h := startController(t, ReconcilerFunc(func(_ context.Context, r Request) (Result, error) {
		calls.inc(r)
		return Result{}, nil
	}), Options{Partitioner: testPartitioner, StartInactive: true})
	active := set(0, 2, 4)
	if err := h.c.Activate(context.Background(), active); err != nil {
		t.Fatal(err)
	}
	in, out := keysIn(testPartitioner, active, 20)
	for i := range in {
		h.src.Add(in[i])
		h.src.Add(out[i])
	}
	testwait.True(t, 10*time.Second, "admitted keys reconciled", func() bool { return h.result("success") == float64(len(in)) })
	for _, r := range out {
		if calls.get(r) != 0 {
			t.Fatalf("%s of inactive partition %d was reconciled", r, partitionOf(r))
		}
	}
	if h.decision("admitted") != 20 || h.decision("foreign") != 20 {
		t.Fatalf("gate decisions admitted=%v foreign=%v, want 20 and 20", h.decision("admitted"), h.decision("foreign"))
	}
}

// blocker is a reconciler whose reconciles of chosen keys block until
// released, optionally ignoring context cancellation.
type blocker struct {
	mu        sync.Mutex
	started   map[Request]chan struct{}
	release   chan struct{}
	ignoreCtx bool
	ctxErr    chan error
	returned  chan Request
	calls     *counter
}

func newBlocker(ignoreCtx bool) *blocker {
	return &blocker{started: map[Request]chan struct{}{}, release: make(chan struct{}), ignoreCtx: ignoreCtx,
		ctxErr: make(chan error, 16), returned: make(chan Request, 16), calls: newCounter()}
}

func (b *blocker) startedCh(r Request) chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started[r] == nil {
		b.started[r] = make(chan struct{})
	}
	return b.started[r]
}

func (b *blocker) Reconcile(ctx context.Context, r Request) (Result, error) {
	if b.calls.inc(r) == 1 {
		close(b.startedCh(r))
		if b.ignoreCtx {
			<-b.release
		} else {
			select {
			case <-b.release:
			case <-ctx.Done():
				b.ctxErr <- ctx.Err()
			}
		}
	}
	b.returned <- r
	return Result{}, nil
}

func TestDequeuedRequestOfRevokedPartitionIsNeverReconciled(t *testing.T) {
	b := newBlocker(true)
	h := startController(t, b, Options{Partitioner: testPartitioner}) // one worker
	hold, _ := keysIn(testPartitioner, set(0), 1)
	victim, _ := keysIn(testPartitioner, set(3), 1)
	h.src.Add(hold[0])
	<-b.startedCh(hold[0]) // the only worker is busy
	h.src.Add(victim[0])   // admitted: partition 3 is active
	if h.decision("admitted") != 2 {
		t.Fatalf("admitted = %v, want 2", h.decision("admitted"))
	}
	if err := h.c.Revoke(context.Background(), set(3), false); err != nil {
		t.Fatalf("Revoke of a partition with nothing in flight: %v", err)
	}
	close(b.release)
	testwait.True(t, 10*time.Second, "queued request dropped", func() bool { return h.decision("inactive") == 1 })
	if got := b.calls.get(victim[0]); got != 0 {
		t.Fatalf("request of revoked partition 3 reconciled %d times", got)
	}
}

func TestRevokeWaitsForInFlightReconcileIgnoringCancellation(t *testing.T) {
	b := newBlocker(true)
	h := startController(t, b, Options{Partitioner: testPartitioner, DrainReportAfter: 10 * time.Millisecond})
	keys, _ := keysIn(testPartitioner, set(5), 1)
	h.src.Add(keys[0])
	<-b.startedCh(keys[0])

	// A revoke bounded by a deadline fails and leaves the partition revoked
	// and draining; cancellation (grace 0) does not end the reconcile.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := h.c.Revoke(ctx, set(5), true)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Revoke with an in-flight reconcile and a 50ms deadline: %v, want DeadlineExceeded", err)
	}
	if h.c.ActivePartitions().Has(5) || h.c.InFlight() != 1 {
		t.Fatalf("after a failed Revoke: active=%s inFlight=%d; want 5 revoked and 1 in flight", h.c.ActivePartitions(), h.c.InFlight())
	}
	// That Revoke's report timer (10ms) and its deadline (50ms) may both be
	// due when it selects on a loaded machine, so it counts 0 or 1 overdue
	// drains; the patient Revoke below must add exactly one.
	before := h.metric("kshard_drain_overdue_total", nil)
	if before > 1 {
		t.Fatalf("kshard_drain_overdue_total = %v after one Revoke, want at most 1", before)
	}

	// A patient revoke reports the drain overdue once, keeps waiting, and
	// returns only after the reconcile returned.
	var reconcileReturned, revokeSawReturned bool
	var mu sync.Mutex
	revoked := make(chan error, 1)
	go func() {
		err := h.c.Revoke(context.Background(), set(5), false)
		mu.Lock()
		revokeSawReturned = reconcileReturned
		mu.Unlock()
		revoked <- err
	}()
	testwait.True(t, 10*time.Second, "the patient Revoke reports its drain overdue", func() bool {
		return h.metric("kshard_drain_overdue_total", nil) == before+1
	})
	// The reconcile has not been released, so Revoke must still be waiting.
	select {
	case err := <-revoked:
		t.Fatalf("Revoke returned %v while a reconcile of the partition was in flight", err)
	default:
	}
	mu.Lock()
	reconcileReturned = true
	mu.Unlock()
	close(b.release)
	if err := <-revoked; err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !revokeSawReturned {
		t.Fatal("Revoke returned before the reconcile did")
	}
	if h.c.InFlight() != 0 {
		t.Fatalf("InFlight = %d after the drain", h.c.InFlight())
	}
	if got := h.metric("kshard_drain_overdue_total", nil); got != before+1 {
		t.Fatalf("kshard_drain_overdue_total = %v after the drain, want %v: one Revoke counts one overdue drain however long it waits", got, before+1)
	}
}

func TestRevokeCancelsAfterGracePeriod(t *testing.T) {
	b := newBlocker(false)
	h := startController(t, b, Options{Partitioner: testPartitioner, DrainGracePeriod: 40 * time.Millisecond})
	keys, _ := keysIn(testPartitioner, set(1), 1)
	other, _ := keysIn(testPartitioner, set(2), 1)
	h.src.Add(keys[0])
	<-b.startedCh(keys[0])
	start := time.Now()
	if err := h.c.Revoke(context.Background(), set(1), false); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	if took := time.Since(start); took < 40*time.Millisecond {
		t.Fatalf("Revoke returned after %s, before the 40ms grace period", took)
	}
	if err := <-b.ctxErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("reconcile context ended with %v, want Canceled", err)
	}
	// Other partitions are unaffected.
	h.src.Add(other[0])
	testwait.True(t, 10*time.Second, "other partition still reconciled", func() bool { return b.calls.get(other[0]) == 1 })
}

func TestRevokeWithZeroGraceCancelsAtOnce(t *testing.T) {
	b := newBlocker(false)
	h := startController(t, b, Options{Partitioner: testPartitioner, DrainGracePeriod: time.Hour})
	keys, _ := keysIn(testPartitioner, set(6), 1)
	h.src.Add(keys[0])
	<-b.startedCh(keys[0])
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.c.Revoke(ctx, shard.FullPartitionSet(testP), true); err != nil {
		t.Fatalf("fencing Revoke: %v", err)
	}
	if err := <-b.ctxErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("reconcile context ended with %v, want Canceled", err)
	}
	if !h.c.ActivePartitions().IsEmpty() {
		t.Fatal("fenced controller still has active partitions")
	}
}

func TestRevokeReportsReactivationDuringDrain(t *testing.T) {
	b := newBlocker(true)
	h := startController(t, b, Options{Partitioner: testPartitioner})
	keys, _ := keysIn(testPartitioner, set(4), 1)
	h.src.Add(keys[0])
	<-b.startedCh(keys[0])
	revoked := make(chan error, 1)
	go func() { revoked <- h.c.Revoke(context.Background(), set(4), false) }()
	testwait.True(t, 10*time.Second, "revoked", func() bool { return !h.c.ActivePartitions().Has(4) })
	if err := h.c.Activate(context.Background(), set(4)); err != nil {
		t.Fatal(err)
	}
	err := <-revoked
	if err == nil || !strings.Contains(err.Error(), "activated again") {
		t.Fatalf("Revoke: %v, want an error saying the partition was re-activated", err)
	}
	close(b.release)
}

func TestPartitionSetSizeMustMatch(t *testing.T) {
	c, _ := New("size", ReconcilerFunc(noop), Options{Partitioner: testPartitioner, Registerer: newRegistry()})
	if err := c.Activate(context.Background(), shard.NewPartitionSet(testP+1, 0)); err == nil {
		t.Fatal("Activate with a set of the wrong size must fail")
	}
	if err := c.Revoke(context.Background(), shard.NewPartitionSet(3, 0), false); err == nil {
		t.Fatal("Revoke with a set of the wrong size must fail")
	}
}

// fakeInformer returns a started informer over objs.
func fakeInformer(t *testing.T, objs ...*corev1.ConfigMap) (toolscache.SharedIndexInformer, *fcache.FakeControllerSource) {
	t.Helper()
	src := fcache.NewFakeControllerSource()
	for _, o := range objs {
		src.Add(o)
	}
	inf := toolscache.NewSharedIndexInformer(noWatchList{src}, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { inf.RunWithContext(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return inf, src
}

type noWatchList struct{ *fcache.FakeControllerSource }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

func configMap(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)}}
}

func TestActivateReplaysEachKeyOfNewPartitionsOnce(t *testing.T) {
	var objs []*corev1.ConfigMap
	for i := range 200 {
		objs = append(objs, configMap("ns", "obj-"+strconv.Itoa(i)))
	}
	inf, _ := fakeInformer(t, objs...)
	calls := newCounter()
	// Two sources map every object to the same request: the replay must
	// still enqueue each key once.
	h := startController(t, ReconcilerFunc(func(_ context.Context, r Request) (Result, error) {
		calls.inc(r)
		return Result{}, nil
	}), Options{Partitioner: testPartitioner, StartInactive: true, AllowUnreplayedSources: true},
		FromInformer(inf, EnqueueRequestForObject{}),
		FromInformer(inf, EnqueueRequestsFromMapFunc(func(_ context.Context, o Object) []Request {
			return []Request{req(o.GetNamespace(), o.GetName())}
		})),
		Channel(make(chan GenericEvent), EnqueueRequestForObject{}),
	)
	testwait.True(t, 10*time.Second, "initial list dropped as foreign", func() bool { return h.decision("foreign") == 400 })

	first := set(1, 3)
	want := map[Request]bool{}
	for _, o := range objs {
		if r := req(o.Namespace, o.Name); first.Has(partitionOf(r)) {
			want[r] = true
		}
	}
	if err := h.c.Activate(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	testwait.True(t, 10*time.Second, "replayed keys reconciled", func() bool { return calls.total() == len(want) })
	if got := h.decision("admitted"); got != float64(len(want)) {
		t.Fatalf("Activate admitted %v requests, want %d (each key of partitions 1 and 3 once)", got, len(want))
	}
	for r := range want {
		if calls.get(r) != 1 {
			t.Fatalf("%s reconciled %d times, want 1", r, calls.get(r))
		}
	}

	// Activating again, with one partition already active, replays only
	// the new one.
	second := set(1, 5)
	extra := 0
	for _, o := range objs {
		if partitionOf(req(o.Namespace, o.Name)) == 5 {
			extra++
		}
	}
	if err := h.c.Activate(context.Background(), second); err != nil {
		t.Fatal(err)
	}
	testwait.True(t, 10*time.Second, "the second replay's keys reconciled", func() bool { return calls.total() == len(want)+extra })
	if got := h.decision("admitted"); got != float64(len(want)+extra) {
		t.Fatalf("second Activate admitted %v in total, want %d", got, len(want)+extra)
	}
	if !h.c.ActivePartitions().Equal(set(1, 3, 5)) {
		t.Fatalf("active = %s, want {1,3,5}", h.c.ActivePartitions())
	}
}

func TestActivatedPartitionReceivesLiveEvents(t *testing.T) {
	inf, src := fakeInformer(t)
	calls := newCounter()
	h := startController(t, ReconcilerFunc(func(_ context.Context, r Request) (Result, error) {
		calls.inc(r)
		return Result{}, nil
	}), Options{Partitioner: testPartitioner, StartInactive: true}, FromInformer(inf, EnqueueRequestForObject{}))
	if err := h.c.Activate(context.Background(), shard.FullPartitionSet(testP)); err != nil {
		t.Fatal(err)
	}
	cm := configMap("ns", "late")
	src.Add(cm)
	testwait.True(t, 10*time.Second, "live event reconciled", func() bool { return calls.get(req("ns", "late")) == 1 })
	src.Delete(cm)
	testwait.True(t, 10*time.Second, "delete reconciled", func() bool { return calls.get(req("ns", "late")) == 2 })
}
