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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/internal/cache/cachekit"
	"github.com/kshard/kshard/shard"
)

// selectorServer is the part of an API server a Labelled's views see: LISTs
// and watches by label selector, where a change that takes an object out of
// a selector reaches that watch as DELETED with its last matching content at
// the change's resourceVersion, as the watch cache sends it. The test sets
// every resourceVersion itself.
type selectorServer struct {
	mu       sync.Mutex
	objs     map[string]*corev1.ConfigMap
	rv       int // the newest resourceVersion applied; a LIST's
	watchers []*selectorWatcher
}

type selectorWatcher struct {
	sel    labels.Selector
	w      *watch.FakeWatcher
	paused bool // its events are not sent: the watch lags
}

// send delivers ev to the watcher unless it is paused or stopped.
func (w *selectorWatcher) send(ev watch.Event) {
	if w.w.IsStopped() || w.paused {
		return
	}
	w.w.Action(ev.Type, ev.Object)
}

// pause stops sending events to the watches whose selector matches
// labelled, as if they lagged until their informers stop.
func (s *selectorServer) pause(labelled map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.watchers {
		if w.sel.Matches(labels.Set(labelled)) {
			w.paused = true
		}
	}
}

func (s *selectorServer) listWatch() *toolscache.ListWatch {
	return &toolscache.ListWatch{
		ListWithContextFunc: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
			sel, err := labels.Parse(o.LabelSelector)
			if err != nil {
				return nil, err
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(max(s.rv, 1))}}
			for _, obj := range s.objs {
				if sel.Matches(labels.Set(obj.Labels)) {
					list.Items = append(list.Items, *obj.DeepCopy())
				}
			}
			return list, nil
		},
		WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			sel, err := labels.Parse(o.LabelSelector)
			if err != nil {
				return nil, err
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			w := watch.NewFakeWithChanSize(16, false)
			s.watchers = append(s.watchers, &selectorWatcher{sel: sel, w: w})
			return w, nil
		},
	}
}

// apply stores obj and sends every watch what the change means to it.
func (s *selectorServer) apply(obj *corev1.ConfigMap) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := shard.KeyOf(obj.Namespace, obj.Name)
	old := s.objs[key]
	s.objs[key] = obj.DeepCopy()
	rv, _ := strconv.Atoi(obj.ResourceVersion)
	s.rv = max(s.rv, rv)
	for _, w := range s.watchers {
		wasIn := old != nil && w.sel.Matches(labels.Set(old.Labels))
		isIn := w.sel.Matches(labels.Set(obj.Labels))
		switch {
		case wasIn && isIn:
			w.send(watch.Event{Type: watch.Modified, Object: obj.DeepCopy()})
		case isIn:
			w.send(watch.Event{Type: watch.Added, Object: obj.DeepCopy()})
		case wasIn:
			last := old.DeepCopy()
			last.ResourceVersion = obj.ResourceVersion
			w.send(watch.Event{Type: watch.Deleted, Object: last})
		}
	}
}

// remove deletes the object of key at resourceVersion rv.
func (s *selectorServer) remove(key string, rv int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.objs[key]
	delete(s.objs, key)
	s.rv = max(s.rv, rv)
	for _, w := range s.watchers {
		if old != nil && w.sel.Matches(labels.Set(old.Labels)) {
			last := old.DeepCopy()
			last.ResourceVersion = strconv.Itoa(rv)
			w.send(watch.Event{Type: watch.Deleted, Object: last})
		}
	}
}

func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
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
	srv := &selectorServer{objs: map[string]*corev1.ConfigMap{}}
	for p := range 4 {
		obj := labelled(fmt.Sprintf("in-%d", p), p, "a")
		srv.objs[shard.KeyOf("ns", obj.Name)] = obj
	}
	s, err := New(Options{LabelKey: labelKey, Partitions: part.Count(), ListWatch: srv.listWatch(), Example: &corev1.ConfigMap{}})
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
	srv.apply(changed) // while hidden
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
	srv *selectorServer
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
	f := &compactionFixture{srv: &selectorServer{objs: map[string]*corev1.ConfigMap{}}, blockAt: blockAt, blocked: make(chan struct{}), release: make(chan struct{})}
	for _, obj := range objs {
		f.srv.objs[shard.KeyOf(obj.Namespace, obj.Name)] = obj
	}
	s, err := New(Options{LabelKey: compactionLabelKey, Partitions: 8, ListWatch: f.srv.listWatch(), Example: &corev1.ConfigMap{}, MaxSegments: 1})
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
	f.srv.apply(compactionObject("a", 0, 5))
	<-f.blocked
	f.srv.apply(compactionObject("a", 0, 6)) // queued behind the held-up event
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
	f.srv.pause(compactionObject("c", 0, 0).Labels) // the first segment's watch lags
	f.srv.remove("ns/c", 7)
	both := shard.NewPartitionSet(8, 0, 1)
	f.s.Hold(both)
	await(t, "the compaction to take over", func() bool { return f.s.Segments() == 1 && f.s.SyncedPartitions().Equal(both) })
	await(t, "the deletion of c passed on", func() bool { return f.told("delete c@2") })
	if _, ok, _ := f.s.GetByKey("ns/c"); ok {
		t.Error("the deleted object is still served")
	}
}
