package segmented_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/internal/cache/cachetest"
	"github.com/kshard/kshard/internal/cache/segmented"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
	"github.com/kshard/kshard/shard"
)

// segmentedFixture is a control plane with ConfigMaps in many namespaces
// and a Segmented over them.
type segmentedFixture struct {
	t   *testing.T
	cs  kubernetes.Interface
	rp  shard.RangePartitioner
	seg *segmented.Segmented
	// seen: keys the registered handler was told of (added, not deleted).
	mu   sync.Mutex
	seen map[string]bool
}

func newSegmentedFixture(t *testing.T, gate, filtered bool, maxSegments int, wrap ...func(toolscache.ListerWatcherWithContext) toolscache.ListerWatcherWithContext) *segmentedFixture {
	t.Helper()
	cp := controlplane.ForTest(t, controlplane.Options{ShardedListAndWatch: gate})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := &segmentedFixture{t: t, cs: kubernetes.NewForConfigOrDie(cp.Config()), seen: map[string]bool{}}
	cachetest.CreateShardingFixture(t, ctx, f.cs, 12, 10)
	// A segment's first LIST (resourceVersion 0) is served from the API
	// server's watch cache, which may not hold the last creates yet; those
	// would then arrive as watch events, not in the LIST the tests count.
	all, err := f.cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		cached, err := f.cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		return err == nil && len(cached.Items) >= len(all.Items), nil
	})
	if err != nil {
		t.Fatalf("waiting for the watch cache to hold the fixture's ConfigMaps: %v", err)
	}
	if f.rp, err = shard.NewRangePartitioner(shard.SchemeUID, 8); err != nil {
		t.Fatal(err)
	}
	var lw toolscache.ListerWatcherWithContext = toolscache.NewListWatchFromClient(f.cs.CoreV1().RESTClient(), "configmaps", metav1.NamespaceAll, fields.Everything())
	for _, w := range wrap {
		lw = w(lw)
	}
	f.seg, err = segmented.New(segmented.Options{Partitioner: f.rp, ListWatch: lw, Example: &corev1.ConfigMap{}, Filtered: filtered, MaxSegments: maxSegments})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.seg.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { f.note(obj, true) },
		UpdateFunc: func(_, obj any) { f.note(obj, true) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			f.note(obj, false)
		},
	})
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.seg.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	return f
}

func (f *segmentedFixture) note(obj any, present bool) {
	cm := obj.(*corev1.ConfigMap)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen[shard.KeyOf(cm.Namespace, cm.Name)] = present
}

// inPartitions lists every ConfigMap on the server (no selector) and
// returns the keys of those in set, sorted.
func (f *segmentedFixture) inPartitions(set shard.PartitionSet) []string {
	f.t.Helper()
	list, err := f.cs.CoreV1().ConfigMaps("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	var keys []string
	for _, cm := range list.Items {
		if p, ok := f.rp.PartitionOfObject(cm.Namespace, string(cm.UID)); ok && set.Has(p) {
			keys = append(keys, shard.KeyOf(cm.Namespace, cm.Name))
		}
	}
	slices.Sort(keys)
	return keys
}

func (f *segmentedFixture) cached() []string {
	var keys []string
	for _, obj := range f.seg.List() {
		cm := obj.(*corev1.ConfigMap)
		keys = append(keys, shard.KeyOf(cm.Namespace, cm.Name))
	}
	slices.Sort(keys)
	return keys
}

// holdAndSync holds set and waits until exactly set is synced.
func (f *segmentedFixture) holdAndSync(set shard.PartitionSet) {
	f.t.Helper()
	f.seg.Hold(set)
	f.await(fmt.Sprintf("partitions %v synced", set), func() bool { return f.seg.SyncedPartitions().Equal(set) })
}

func (f *segmentedFixture) await(what string, cond func() bool) {
	f.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		f.t.Fatalf("waiting for %s: %v", what, err)
	}
}

func (f *segmentedFixture) expectCached(set shard.PartitionSet) {
	f.t.Helper()
	want := f.inPartitions(set)
	if got := f.cached(); !slices.Equal(got, want) {
		f.t.Fatalf("cached %d objects, want the %d of partitions %v\n got  %v\n want %v", len(got), len(want), set, got, want)
	}
	if len(want) == 0 {
		f.t.Fatalf("partitions %v hold no object: the fixture does not exercise the filter", set)
	}
}

// TestIntegrationSegmentedListsOnlyWhatItGains runs a Segmented against a
// kube-apiserver with sharded list and watch: holding partitions lists
// exactly their objects, a gain lists only the gained ranges (nothing
// cached is listed again), a release drops the objects at once and stops
// the segment, and live events reach the handler for held partitions only.
func TestIntegrationSegmentedListsOnlyWhatItGains(t *testing.T) {
	f := newSegmentedFixture(t, true, true, 0)
	first := shard.NewPartitionSet(8, 0, 1, 2)
	f.holdAndSync(first)
	f.expectCached(first)
	if got, want := f.seg.ObjectsListed(), int64(len(f.inPartitions(first))); got != want {
		t.Fatalf("the first LIST returned %d objects, want only the %d of partitions %v", got, want, first)
	}

	gained := shard.NewPartitionSet(8, 3, 4)
	both := first.Union(gained)
	before := f.seg.ObjectsListed()
	f.holdAndSync(both)
	f.expectCached(both)
	if got, want := f.seg.ObjectsListed()-before, int64(len(f.inPartitions(gained))); got != want {
		t.Fatalf("gaining %v listed %d objects, want only its %d", gained, got, want)
	}
	if n := f.seg.UnfilteredLists(); n != 0 {
		t.Fatalf("%d LISTs came back without the selector's echo from a server with the gate", n)
	}
	t.Logf("held %v: listed %d objects of %d in the cluster; gaining %v listed %d", first, before, len(f.inPartitions(shard.FullPartitionSet(8))), gained, f.seg.ObjectsListed()-before)

	f.seg.Hold(gained)
	f.expectCached(gained)
	if n := f.seg.Segments(); n != 1 {
		t.Fatalf("%d segments after releasing everything of the first; want 1", n)
	}
	if got := f.seg.SyncedPartitions(); !got.Equal(gained) {
		t.Fatalf("synced %v after the release, want %v", got, gained)
	}

	// Live events: a new object in a held partition reaches the handler;
	// one in a released partition does not reach the cache.
	ctx := context.Background()
	var inHeld, inReleased string
	for i := 0; inHeld == "" || inReleased == ""; i++ {
		if i > 400 {
			t.Fatal("no new ConfigMap landed in both a held and a released partition")
		}
		cm, err := f.cs.CoreV1().ConfigMaps("n0-sharding-fixture").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("live-%d", i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p, _ := f.rp.PartitionOfObject(cm.Namespace, string(cm.UID))
		switch {
		case gained.Has(p) && inHeld == "":
			inHeld = shard.KeyOf(cm.Namespace, cm.Name)
		case first.Has(p) && inReleased == "":
			inReleased = shard.KeyOf(cm.Namespace, cm.Name)
		}
	}
	f.await("the handler to see "+inHeld, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.seen[inHeld] })
	f.expectCached(gained)
	f.mu.Lock()
	leaked := f.seen[inReleased]
	f.mu.Unlock()
	if leaked {
		t.Fatalf("the handler saw %s, of a released partition", inReleased)
	}
	if _, ok, _ := f.seg.GetByKey(inReleased); ok {
		t.Fatalf("GetByKey(%s) found an object of a released partition", inReleased)
	}
}

// TestIntegrationSegmentedRestartsAnUnsyncedSegment: a ring that changes
// twice in a moment (formation) gains partitions and gives most of them up
// while their LIST is still in flight; the segment is restarted for what
// is still held, so the released partitions' objects are never listed or
// cached (before, they stayed in the segment's store, hidden, until its
// last partition went).
func TestIntegrationSegmentedRestartsAnUnsyncedSegment(t *testing.T) {
	blocked := make(chan struct{}, 8)
	release := make(chan struct{})
	f := newSegmentedFixture(t, true, true, 0, func(inner toolscache.ListerWatcherWithContext) toolscache.ListerWatcherWithContext {
		first := true
		return &toolscache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				if first { // only the reflector of the first segment lists here before release
					first = false
					blocked <- struct{}{}
					select {
					case <-release:
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}
				return inner.ListWithContext(ctx, o)
			},
			WatchFuncWithContext: inner.WatchWithContext,
		}
	})
	wide, narrow := shard.NewPartitionSet(8, 0, 1, 2, 3, 4, 5), shard.NewPartitionSet(8, 2, 5)
	f.seg.Hold(wide)
	select {
	case <-blocked:
	case <-time.After(time.Minute):
		t.Fatal("the first segment never listed")
	}
	f.seg.Hold(narrow)
	close(release)
	f.holdAndSync(narrow)
	f.expectCached(narrow)
	if got, want := f.seg.ObjectsListed(), int64(len(f.inPartitions(narrow))); got != want {
		t.Fatalf("listed %d objects, want only the %d of the partitions still held %v (the released ones were listed)", got, want, narrow)
	}
	if n := f.seg.Segments(); n != 1 {
		t.Fatalf("%d segments, want 1: the restarted one", n)
	}
}

// TestIntegrationSegmentedCompacts: more segments than MaxSegments are
// replaced, once the union is synced, by one informer.
func TestIntegrationSegmentedCompacts(t *testing.T) {
	f := newSegmentedFixture(t, true, true, 2)
	held := shard.NewPartitionSet(8)
	for _, p := range []int{0, 3, 6} {
		held.Add(p)
		f.holdAndSync(held.Clone())
	}
	f.await("one segment after compaction", func() bool { return f.seg.Segments() == 1 })
	f.expectCached(held)
}

// TestIntegrationSegmentedNeverTrustsAnUnfilteredServer: against an API
// server without the feature gate, which ignores the selector, the cache
// still holds exactly the held partitions (the client-side check), though
// every LIST returns everything; the fallback (Filtered false) does the
// same with one informer.
func TestIntegrationSegmentedNeverTrustsAnUnfilteredServer(t *testing.T) {
	for _, filtered := range []bool{true, false} {
		t.Run(fmt.Sprintf("filtered=%v", filtered), func(t *testing.T) {
			f := newSegmentedFixture(t, false, filtered, 0)
			held := shard.NewPartitionSet(8, 1, 5)
			f.holdAndSync(held)
			f.expectCached(held)
			all := int64(len(f.inPartitions(shard.FullPartitionSet(8))))
			if got := f.seg.ObjectsListed(); got != all {
				t.Fatalf("listed %d objects; a server without the gate returns all %d", got, all)
			}
			if n := f.seg.UnfilteredLists(); filtered && n == 0 {
				t.Fatal("a LIST with a selector came back from a server without the gate and was not noticed")
			}
		})
	}
}
