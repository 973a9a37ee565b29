package labelled

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kshard/kshard/internal/cache/cachekit"
	"github.com/kshard/kshard/internal/cache/cachetest"
	"github.com/kshard/kshard/internal/testwait"
	"github.com/kshard/kshard/shard"
)

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
	srv := cachetest.NewSelectorServer(at(11, own))
	client := &gatedClient{entered: make(chan struct{}, 1), release: make(chan struct{})}
	client.answer = func() runtime.Object { return at(12, elsewhere) } // live when the read began
	// The segment's store is held back from dropping the state at 14: its
	// second transform is the store's (the first, leaving's pending copy).
	stall := &stallAt{rv: 14, nth: 2, reached: make(chan struct{}), release: make(chan struct{})}
	l, err := New(Options{
		LabelKey: labelKey, Partitioner: part, ListWatch: srv.ListWatch(), Example: &corev1.ConfigMap{},
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
	srv.Apply(at(12, elsewhere))
	<-client.entered
	// Its partition's owner puts the label back while the read runs: the
	// segment holds it again, and the pending state ends.
	srv.Apply(at(13, own))
	await(t, "the segment to hold it again, not pending", func() bool {
		obj, ok, _ := l.segs.GetByKey(key)
		return ok && cachekit.ResourceVersion(obj) == 13 && pendingAt() == 0
	})
	// And a third party takes it out again: the segment's watch passes the
	// DELETED on (leaving makes it pending at 14), and its store is about
	// to drop the state at 13.
	srv.Apply(at(14, elsewhere))
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
	testwait.True(t, 10*time.Second, what, cond)
}
