package segmented

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/internal/cache/cachekit"
	"github.com/kshard/kshard/internal/cache/cachetest"
	"github.com/kshard/kshard/internal/testwait"
	"github.com/kshard/kshard/shard"
)

func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.True(t, 10*time.Second, what, cond)
}

// A partition released and gained again while its segment still lists it
// is that segment's again at once: no second LIST, no second segment whose
// store may lag the first when it takes over reads and events, and the
// changes made while it was hidden are served.
func TestRegainedPartitionStaysWithItsSegment(t *testing.T) {
	const labelKey = "r.kshard.io/xx1-key-p8"
	part := shard.NewPartitioner(8)
	labelled := func(name string, p int, data string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name, UID: types.UID(name), ResourceVersion: "1",
			Labels: map[string]string{labelKey: shard.PartitionLabelValue(p)},
		}, Data: map[string]string{"v": data}}
	}
	var objs []*corev1.ConfigMap
	for p := range 4 {
		objs = append(objs, labelled(fmt.Sprintf("in-%d", p), p, "a"))
	}
	srv := cachetest.NewSelectorServer(objs...)
	s, err := New(Options{LabelKey: labelKey, Partitions: part.Count(), ListWatch: srv.ListWatch(), Example: &corev1.ConfigMap{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	all, without1 := shard.NewPartitionSet(8, 0, 1, 2, 3), shard.NewPartitionSet(8, 0, 2, 3)
	s.Hold(all)
	await(t, "the first segment synced", func() bool { return s.SyncedPartitions().Equal(all) })
	listed := s.ObjectsListed()

	s.Hold(without1)
	if _, ok, _ := s.GetByKey("ns/in-1"); ok {
		t.Fatal("an object of a released partition is served")
	}
	changed := labelled("in-1", 1, "b")
	changed.ResourceVersion = "2"
	srv.Apply(changed) // while hidden
	await(t, "the hidden change cached", func() bool {
		obj, ok, _ := s.segments[0].inf.GetStore().GetByKey("ns/in-1")
		return ok && obj.(*corev1.ConfigMap).Data["v"] == "b"
	})

	s.Hold(all)
	if got := s.SyncedPartitions(); !got.Equal(all) {
		t.Errorf("right after the partition was gained again, synced partitions are %v, want %v", got, all)
	}
	if n := s.Segments(); n != 1 {
		t.Errorf("%d segments run, want the one that still listed the partition", n)
	}
	if n := s.ObjectsListed() - listed; n != 0 {
		t.Errorf("gaining the partition again listed %d objects, want none", n)
	}
	if obj, ok, _ := s.GetByKey("ns/in-1"); !ok || obj.(*corev1.ConfigMap).Data["v"] != "b" {
		t.Errorf("GetByKey(ns/in-1) = %v, %t; want the state changed while it was hidden", obj, ok)
	}
}

// compactionFixture is a Segmented of label segments that compacts at the
// second segment, over a fake server, with a handler that records what it
// is told and can be held up at one resourceVersion.
type compactionFixture struct {
	srv *cachetest.SelectorServer
	s   *Segmented

	mu     sync.Mutex
	events []string // "add|update|delete name@rv"

	blockAt          string // a resourceVersion whose event the handler holds up
	blocked, release chan struct{}
	unblock          func() // closes release, once
}

const compactionLabelKey = "r.kshard.io/xx1-key-p8"

func compactionObject(name string, p, rv int) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: name, UID: types.UID(name), ResourceVersion: strconv.Itoa(rv),
		Labels: map[string]string{compactionLabelKey: shard.PartitionLabelValue(p)},
	}}
}

func newCompactionFixture(t *testing.T, blockAt string, objs ...*corev1.ConfigMap) *compactionFixture {
	t.Helper()
	f := &compactionFixture{srv: cachetest.NewSelectorServer(objs...), blockAt: blockAt, blocked: make(chan struct{}), release: make(chan struct{})}
	s, err := New(Options{LabelKey: compactionLabelKey, Partitions: 8, ListWatch: f.srv.ListWatch(), Example: &corev1.ConfigMap{}, MaxSegments: 1})
	if err != nil {
		t.Fatal(err)
	}
	f.s = s
	note := func(what string, obj any) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		cm := obj.(*corev1.ConfigMap)
		if cm.ResourceVersion == f.blockAt {
			close(f.blocked)
			<-f.release
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.events = append(f.events, fmt.Sprintf("%s %s@%s", what, cm.Name, cm.ResourceVersion))
	}
	if _, err := s.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { note("add", obj) },
		UpdateFunc: func(_, obj any) { note("update", obj) },
		DeleteFunc: func(obj any) { note("delete", obj) },
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	f.unblock = sync.OnceFunc(func() { close(f.release) })
	t.Cleanup(f.unblock) // runs first: a test that failed early must not leave the handler held up
	return f
}

func (f *compactionFixture) told(event string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.events, event)
}

// A compaction takes over only once the segment it replaces has passed on
// every event it received: an update queued behind a slow handler when the
// compaction synced still reaches the handler, and the compaction does not
// pass it on a second time from its LIST.
func TestCompactionWaitsForTheEventsOfTheSegmentItReplaces(t *testing.T) {
	f := newCompactionFixture(t, "5", compactionObject("a", 0, 1), compactionObject("b", 1, 2))
	p0 := shard.NewPartitionSet(8, 0)
	f.s.Hold(p0)
	await(t, "the first segment synced", func() bool { return f.s.SyncedPartitions().Equal(p0) })
	f.srv.Apply(compactionObject("a", 0, 5))
	<-f.blocked
	f.srv.Apply(compactionObject("a", 0, 6)) // queued behind the held-up event
	await(t, "the first segment to store a@6", func() bool {
		obj, ok, _ := f.s.segments[0].inf.GetStore().GetByKey("ns/a")
		return ok && cachekit.ResourceVersion(obj) == 6
	})

	both := shard.NewPartitionSet(8, 0, 1)
	f.s.Hold(both) // past MaxSegments: a compaction of {0,1}
	f.s.mu.Lock()
	compaction := f.s.segments[len(f.s.segments)-1]
	f.s.mu.Unlock()
	if !compaction.compacts {
		t.Fatal("the second segment is not a compaction")
	}
	await(t, "the compaction's informer synced", compaction.inf.HasSynced)
	checks := f.s.takeoverChecks.Load()
	await(t, "the takeover to check twice more, or to take over", func() bool {
		return f.s.takeoverChecks.Load() >= checks+2 || f.s.SyncedPartitions().Has(1)
	})
	if f.s.SyncedPartitions().Has(1) {
		t.Error("the compaction took over while the segment it replaces still held an event back")
	}
	f.unblock()
	await(t, "the compaction to take over", func() bool { return f.s.Segments() == 1 && f.s.SyncedPartitions().Equal(both) })
	await(t, "the update queued behind the slow handler to arrive", func() bool { return f.told("update a@6") })
	if f.told("add a@6") {
		t.Error("the compaction passed on a@6 from its LIST too, which the replaced segment had received")
	}
	if !f.told("add b@2") {
		t.Error("the compaction did not pass on b, of the partition it gained")
	}
}

// A deletion the replaced segment has not received when the compaction,
// which listed without the object, takes over is passed on by the
// compaction.
func TestCompactionPassesOnADeletionOnlyItsListShowed(t *testing.T) {
	f := newCompactionFixture(t, "", compactionObject("a", 0, 1), compactionObject("c", 0, 2))
	p0 := shard.NewPartitionSet(8, 0)
	f.s.Hold(p0)
	await(t, "the first segment synced", func() bool { return f.s.SyncedPartitions().Equal(p0) })
	f.srv.Pause(compactionObject("c", 0, 0).Labels) // the first segment's watch lags
	f.srv.Remove("ns/c", 7)
	both := shard.NewPartitionSet(8, 0, 1)
	f.s.Hold(both)
	await(t, "the compaction to take over", func() bool { return f.s.Segments() == 1 && f.s.SyncedPartitions().Equal(both) })
	await(t, "the deletion of c passed on", func() bool { return f.told("delete c@2") })
	if _, ok, _ := f.s.GetByKey("ns/c"); ok {
		t.Error("the deleted object is still served")
	}
}
