package labelled

import (
	"context"
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

// gatedClient answers Get with what answer returns, after the test lets it.
type gatedClient struct {
	entered chan struct{}
	release chan struct{}
	answer  func() runtime.Object
}

func (c *gatedClient) Get(ctx context.Context, _, _ string) (runtime.Object, error) {
	select {
	case c.entered <- struct{}{}:
	default:
	}
	select {
	case <-c.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return c.answer(), nil
}

func (*gatedClient) PatchLabels(context.Context, string, string, map[string]string) (string, error) {
	return "", nil
}

// A confirming read that ran while the object left its view again must not
// end the pending state that leaving made: the view still holds the state
// the read returned, but drops it as soon as its watch catches up, and then
// only the pending state serves the object. (Once in 400,000 reads of
// TestLabelledCacheOnStockServer a Get missed an existing object so.)
func TestConfirmingReadDoesNotEndALaterPendingState(t *testing.T) {
	const labelKey = "r.kshard.io/xx1-key-p8"
	part := shard.NewPartitioner(8)
	const ns, name = "ns", "victim"
	key := shard.KeyOf(ns, name)
	own := part.Partition(key)
	elsewhere := (own + 1) % 8 // a partition this replica does not hold
	at := func(rv, partition int) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, UID: types.UID("u1"), ResourceVersion: strconv.Itoa(rv),
			Labels: map[string]string{labelKey: shard.PartitionLabelValue(partition)},
		}}
	}
	srv := &selectorServer{objs: map[string]*corev1.ConfigMap{key: at(11, own)}}
	client := &gatedClient{entered: make(chan struct{}, 1), release: make(chan struct{})}
	client.answer = func() runtime.Object { return at(12, elsewhere) } // live when the read began
	// The segment's store is held back from dropping the state at 14: its
	// second transform is the store's (the first, leaving's pending copy).
	stall := &stallAt{rv: 14, nth: 2, reached: make(chan struct{}), release: make(chan struct{})}
	l, err := New(Options{
		LabelKey: labelKey, Partitioner: part, ListWatch: srv.listWatch(), Example: &corev1.ConfigMap{},
		Client: client, ConfirmAfter: time.Millisecond, LabelQPS: -1, Transform: stall.transform,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	defer func() { cancel(); <-done }()
	held := shard.NewPartitionSet(8, own)
	l.Hold(held)
	await(t, "the partition synced", func() bool { return l.SyncedPartitions().Equal(held) })
	pendingAt := func() uint64 {
		l.mu.Lock()
		defer l.mu.Unlock()
		if p, ok := l.pending[key]; ok {
			return cachekit.ResourceVersion(p.obj)
		}
		return 0
	}

	// A third party labels it for a partition not held here: it leaves the
	// segment, pending, and the confirming read starts.
	srv.apply(at(12, elsewhere))
	<-client.entered
	// Its partition's owner puts the label back while the read runs: the
	// segment holds it again, and the pending state ends.
	srv.apply(at(13, own))
	await(t, "the segment to hold it again, not pending", func() bool {
		obj, ok, _ := l.segs.GetByKey(key)
		return ok && cachekit.ResourceVersion(obj) == 13 && pendingAt() == 0
	})
	// And a third party takes it out again: the segment's watch passes the
	// DELETED on (leaving makes it pending at 14), and its store is about
	// to drop the state at 13.
	srv.apply(at(14, elsewhere))
	<-stall.reached
	if got := pendingAt(); got != 14 {
		t.Fatalf("after leaving, the pending state is at resourceVersion %d, want 14", got)
	}
	// The read answers with the state from before both changes, which the
	// segment's copy (13) is newer than.
	close(client.release)
	await(t, "the confirmation to have handled its read", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		p, ok := l.pending[key]
		return !ok || p.nextCheck.After(time.Now().Add(confirmReread/2))
	})
	close(stall.release)
	await(t, "the segment to drop it", func() bool { _, ok, _ := l.segs.GetByKey(key); return !ok })
	if _, ok, _ := l.GetByKey(key); !ok {
		t.Fatal("GetByKey missed an object that exists: the confirming read ended the pending state leaving made after it began")
	}
	if got := pendingAt(); got != 14 {
		t.Errorf("the pending state is at resourceVersion %d, want 14 (the read's older answer must not replace it)", got)
	}
}

// stallAt is a transform that blocks its nth call for resourceVersion rv
// until release is closed.
type stallAt struct {
	rv, nth          int
	mu               sync.Mutex
	calls            int
	reached, release chan struct{}
}

func (s *stallAt) transform(obj any) (any, error) {
	if cm, ok := obj.(*corev1.ConfigMap); ok && cm.ResourceVersion == strconv.Itoa(s.rv) {
		s.mu.Lock()
		s.calls++
		n := s.calls
		s.mu.Unlock()
		if n == s.nth {
			close(s.reached)
			<-s.release
		}
	}
	return obj, nil
}

func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
