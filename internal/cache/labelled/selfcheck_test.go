package labelled

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kshard/kshard/internal/cache/cachetest"
	"github.com/kshard/kshard/shard"
)

// checkFixture is a Labelled over a cachetest.SelectorServer whose self-check the
// test runs by hand (checkOnce), one check at a time.
type checkFixture struct {
	t     *testing.T
	srv   *cachetest.SelectorServer
	l     *Labelled
	st    checkState
	rv    int
	part  shard.Partitioner
	own   int // the partition held
	other int // a partition not held
}

const checkLabelKey = "c.kshard.io/xx1-key-p8"

func newCheckFixture(t *testing.T) *checkFixture {
	f := &checkFixture{t: t, srv: cachetest.NewSelectorServer(), part: shard.NewPartitioner(8), own: 3, other: 5}
	l, err := New(Options{
		LabelKey: checkLabelKey, Partitioner: f.part, ListWatch: f.srv.ListWatch(), Example: &corev1.ConfigMap{},
		Client: serverClient{f.srv}, LabelQPS: -1,
		CheckInterval: time.Hour, // the test checks by hand
	})
	if err != nil {
		t.Fatal(err)
	}
	f.l = l
	return f
}

// serverClient reads objects from a cachetest.SelectorServer; it labels nothing
// (no partition is active in these tests).
type serverClient struct{ srv *cachetest.SelectorServer }

func (c serverClient) Get(_ context.Context, ns, name string) (runtime.Object, error) {
	if obj, ok := c.srv.Get(ns, name); ok {
		return obj, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (serverClient) PatchLabels(context.Context, string, string, map[string]string) (string, error) {
	return "", errors.New("no partition is active: nothing is labelled")
}

func (f *checkFixture) run() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.l.Run(ctx) }()
	f.t.Cleanup(func() { cancel(); <-done })
	held := shard.NewPartitionSet(8, f.own)
	f.l.Hold(held)
	await(f.t, "the held partition to sync", func() bool { return f.l.SyncedPartitions().Equal(held) })
}

// name returns the nth name whose key maps to partition p.
func (f *checkFixture) name(prefix string, p, nth int) string {
	for i := 0; ; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		if f.part.Partition(shard.KeyOf("ns", name)) == p {
			if nth == 0 {
				return name
			}
			nth--
		}
	}
}

// put stores (or changes) the object name labelled label ("" for none) at
// the next resourceVersion, as the server would.
func (f *checkFixture) put(name, label string) {
	f.rv++
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: name, UID: types.UID("uid-" + name), ResourceVersion: strconv.Itoa(f.rv),
	}, Data: map[string]string{"rv": strconv.Itoa(f.rv)}}
	if label != "" {
		cm.Labels = map[string]string{checkLabelKey: label}
	}
	f.srv.Apply(cm)
}

func (f *checkFixture) check() CheckReport {
	f.t.Helper()
	f.l.checkOnce(context.Background(), &f.st)
	return *f.l.CheckReport()
}

func (f *checkFixture) expect(r CheckReport, missing int, examples []string, relists int64) {
	f.t.Helper()
	if r.Missing != missing || !slices.Equal(r.Examples, examples) || r.Relists != relists {
		f.t.Fatalf("check %d: %d missing %v, %d relists; want %d %v, %d relists", r.Checks, r.Missing, r.Examples, r.Relists, missing, examples, relists)
	}
}

// The self-check compares the objects of the synced partitions, labelled
// and unlabelled, and reports an object missing only once the store has
// had an interval to get it: a store that lags (its watch held back) is
// not counted while the object changes, and is once it has stayed
// unchanged from one check to the next; an object lost from a store after
// a check is counted at the next. Each such finding relists the views
// concerned once, and the next check finds everything again; a loss found
// again before a check has found nothing missing does not relist a second
// time.
func TestSelfCheckCountsOnlyWhatStaysMissing(t *testing.T) {
	f := newCheckFixture(t)
	own, other := shard.PartitionLabelValue(f.own), shard.PartitionLabelValue(f.other)
	for i := range 3 {
		f.put(f.name("labelled", f.own, i), own)
	}
	unlabelled := f.name("unlabelled", f.own, 0)
	f.put(unlabelled, "")
	f.put(f.name("garbled", f.own, 0), "abc")
	// Not this replica's to hold: labelled for, or mapping to, another
	// partition.
	f.put(f.name("elsewhere", f.other, 0), other)
	f.put(f.name("unlabelled-elsewhere", f.other, 0), "")
	f.put(f.name("mislabelled", f.other, 0), own) // stored by its label, served by its request's partition
	f.run()
	// One LIST at Run, and another if Hold came after it (the first view
	// then dropped the held partition's objects).
	lists := f.l.Stats().UnlabelledLists.Load()

	r := f.check()
	f.expect(r, 0, nil, 0)
	if r.Checked != 5 || r.Requests != 2 {
		t.Fatalf("the first check compared %d objects in %d LISTs; want the 5 of the held partition in 2 (labelled, unlabelled)", r.Checked, r.Requests)
	}

	// The label segment's watch lags: a new object is not in the store.
	f.srv.Pause(map[string]string{checkLabelKey: own})
	late := f.name("late", f.own, 0)
	f.put(late, own)
	f.expect(f.check(), 0, nil, 0) // new since the last check
	f.put(late, own)
	f.expect(f.check(), 0, nil, 0) // changed since the last check
	f.expect(f.check(), 1, []string{"ns/" + late}, 1)
	await(t, "the relisted segments to serve it", func() bool { _, ok, _ := f.l.GetByKey("ns/" + late); return ok })
	f.expect(f.check(), 0, nil, 1)

	// An unlabelled object lost from its view after a check is counted at
	// the next: it was at this state when the last check listed.
	if n := f.l.DropForTest("ns/" + unlabelled); n != 1 {
		t.Fatalf("the unlabelled object was in %d stores, want 1", n)
	}
	if _, ok, _ := f.l.GetByKey("ns/" + unlabelled); ok {
		t.Fatal("the dropped object is still served")
	}
	f.expect(f.check(), 1, []string{"ns/" + unlabelled}, 2)
	await(t, "a new unlabelled view to serve it", func() bool { _, ok, _ := f.l.GetByKey("ns/" + unlabelled); return ok })
	// Lost again before a check found nothing missing: counted, not
	// relisted again (the relist did not stick; a loop of relists would
	// not help).
	f.l.DropForTest("ns/" + unlabelled)
	f.expect(f.check(), 1, []string{"ns/" + unlabelled}, 2)
	if got := f.l.Stats().UnlabelledLists.Load() - lists; got != 1 {
		t.Errorf("the unlabelled view was listed %d times since it synced, want 1 (the one relist)", got)
	}
}

// A check whose LIST fails is counted as failed and leaves the state the
// next check compares with as it was.
func TestSelfCheckFailedListKeepsThePreviousCheck(t *testing.T) {
	f := newCheckFixture(t)
	fail := false
	inner := f.l.opts.CheckList
	f.l.opts.CheckList = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		if fail {
			return nil, errors.New("connection refused")
		}
		return inner(ctx, o)
	}
	name := f.name("labelled", f.own, 0)
	f.put(name, shard.PartitionLabelValue(f.own))
	f.run()
	f.expect(f.check(), 0, nil, 0)
	listRV := f.st.listRV
	fail = true
	r := f.check()
	if r.Checks != 1 || r.Failed != 1 || f.st.listRV != listRV {
		t.Fatalf("after a failed LIST: %d checks, %d failed, state at %d; want 1, 1, still %d", r.Checks, r.Failed, f.st.listRV, listRV)
	}
	fail = false
	f.l.DropForTest("ns/" + name)
	f.expect(f.check(), 1, []string{"ns/" + name}, 1)
}

// CheckInterval defaults to DefaultCheckInterval; a negative one turns
// the check off, and it reports nothing.
func TestSelfCheckInterval(t *testing.T) {
	for _, tc := range []struct {
		set, want time.Duration
	}{{0, DefaultCheckInterval}, {time.Minute, time.Minute}, {-1, -1}} {
		l, err := New(Options{
			LabelKey: checkLabelKey, Partitioner: shard.NewPartitioner(8), ListWatch: cachetest.NewSelectorServer().ListWatch(),
			Example: &corev1.ConfigMap{}, Client: serverClient{}, CheckInterval: tc.set,
		})
		if err != nil {
			t.Fatal(err)
		}
		if l.opts.CheckInterval != tc.want || (l.CheckReport() == nil) != (tc.want < 0) {
			t.Errorf("CheckInterval %v: %v, report %v; want %v, a report unless off", tc.set, l.opts.CheckInterval, l.CheckReport(), tc.want)
		}
	}
}

// The self-check runs on the cache's clock: none before the clock has moved
// an interval, one once it has, dated by that clock.
func TestSelfCheckRunsOnTheCachesClock(t *testing.T) {
	srv := cachetest.NewSelectorServer()
	start := time.Unix(1_000_000, 0)
	clk := clocktesting.NewFakeClock(start)
	l, err := New(Options{
		LabelKey: checkLabelKey, Partitioner: shard.NewPartitioner(8), ListWatch: srv.ListWatch(), Example: &corev1.ConfigMap{},
		Client: serverClient{srv}, LabelQPS: -1, CheckInterval: time.Minute, Clock: clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	defer func() { cancel(); <-done }()
	held := shard.NewPartitionSet(8, 3)
	l.Hold(held)
	await(t, "the held partition to sync", func() bool { return l.SyncedPartitions().Equal(held) })
	if n := l.CheckReport().Checks; n != 0 {
		t.Fatalf("%d checks before the clock moved, want none", n)
	}
	// Each poll moves the clock an interval: the check loop's ticker may
	// register with the clock after the first step.
	await(t, "a check after the clock moved", func() bool {
		clk.Step(time.Minute)
		return l.CheckReport().Checks > 0
	})
	if r := l.CheckReport(); r.At.Before(start.Add(time.Minute)) || r.At.After(clk.Now()) || r.Missing != 0 {
		t.Errorf("report %+v; want it dated by the fake clock (%v to %v), nothing missing", r, start.Add(time.Minute), clk.Now())
	}
}
