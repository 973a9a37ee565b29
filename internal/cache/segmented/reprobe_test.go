package segmented_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/internal/cache/segmented"
	"github.com/kshard/kshard/internal/cache/shardprobe"
	"github.com/kshard/kshard/shard"
)

// reprobeFixture is a Segmented that starts in the fallback over a fake
// API server which filters LISTs by the held partitions' selector (as
// Kubernetes 1.36 does for custom resources, without echo), with a
// scripted Reprobe.
type reprobeFixture struct {
	t        *testing.T
	cs       *fake.Clientset
	rp       shard.RangePartitioner
	held     shard.PartitionSet
	seg      *segmented.Segmented
	calls    atomic.Int32
	selected atomic.Int32 // LISTs sent with the held partitions' selector

	inHeld, other string // a namespace of the held partition, one of another
}

func newReprobeFixture(t *testing.T, answers ...shardprobe.Result) *reprobeFixture {
	t.Helper()
	rp, err := shard.NewRangePartitioner(shard.SchemeNamespace, 4)
	if err != nil {
		t.Fatal(err)
	}
	f := &reprobeFixture{t: t, cs: fake.NewClientset(), rp: rp, held: shard.NewPartitionSet(4, 1)}
	for i := 0; f.inHeld == "" || f.other == ""; i++ {
		ns := fmt.Sprintf("ns-%d", i)
		switch p, _ := rp.PartitionOfObject(ns, ""); {
		case p == 1 && f.inHeld == "":
			f.inHeld = ns
		case p != 1 && f.other == "":
			f.other = ns
		}
	}
	heldSelector, _ := rp.Selector(f.held)
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			list, err := f.cs.CoreV1().ConfigMaps("").List(ctx, o)
			if err != nil || o.ShardSelector == "" {
				return list, err
			}
			if o.ShardSelector != heldSelector {
				t.Errorf("LIST with selector %q, want the held partitions' %q", o.ShardSelector, heldSelector)
			}
			f.selected.Add(1)
			var kept []corev1.ConfigMap
			for _, cm := range list.Items {
				if p, _ := rp.PartitionOfObject(cm.Namespace, ""); f.held.Has(p) {
					kept = append(kept, cm)
				}
			}
			list.Items = kept
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return f.cs.CoreV1().ConfigMaps("").Watch(ctx, o)
		},
	}
	f.seg, err = segmented.New(segmented.Options{
		Partitioner: rp, ListWatch: lw, Example: &corev1.ConfigMap{},
		Reprobe: func(context.Context) shardprobe.Result {
			i := int(f.calls.Add(1)) - 1
			return answers[min(i, len(answers)-1)]
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { f.seg.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	f.seg.Hold(f.held)
	f.await("the held partition synced", func() bool { return f.seg.SyncedPartitions().Equal(f.held) })
	if f.seg.Filtered() || f.calls.Load() != 0 || f.seg.Segments() != 1 {
		t.Fatalf("an empty kind in the fallback: filtered %v, %d probes, %d segments; want the whole informer and no probe yet", f.seg.Filtered(), f.calls.Load(), f.seg.Segments())
	}
	return f
}

func (f *reprobeFixture) await(what string, cond func() bool) {
	f.t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		f.t.Fatalf("waiting for %s: %v", what, err)
	}
}

func (f *reprobeFixture) create(ns, name string) {
	f.t.Helper()
	if _, err := f.cs.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *reprobeFixture) cached(key string) bool {
	_, ok, _ := f.seg.GetByKey(key)
	return ok
}

// An empty kind starts in the fallback; its first object (in a partition
// not held: the whole informer sees every object) has it probed again.
// A probe that cannot decide is repeated while objects remain; once it
// proves the filter, one segment lists the held partitions with the
// selector and replaces the whole informer, the held partition staying
// synced throughout.
func TestSegmentedMovesToTheServerFilterAtTheFirstObject(t *testing.T) {
	f := newReprobeFixture(t, shardprobe.Result{Retry: true, Reason: "the test object was deleted while probing"}, shardprobe.Result{Filtered: true})
	f.create(f.other, "first")
	f.await("the move to the server's filter", func() bool {
		if !f.seg.SyncedPartitions().Equal(f.held) {
			t.Fatalf("held partition %v not synced during the move: %v", f.held, f.seg.SyncedPartitions())
		}
		return f.seg.Filtered() && f.seg.Segments() == 1 && f.selected.Load() > 0
	})
	if n := f.calls.Load(); n != 2 {
		t.Fatalf("%d probes, want 2: one at the first object, one more after it could not decide", n)
	}
	// The whole informer listed the empty kind; the filtered segment, the
	// held partition's objects only: the other namespace's was not listed.
	if n := f.seg.ObjectsListed(); n != 0 {
		t.Fatalf("listed %d objects; want 0: the kind was empty and the filtered LIST excludes %s", n, f.other)
	}
	f.create(f.inHeld, "held")
	f.create(f.other, "second")
	f.await(f.inHeld+"/held cached", func() bool { return f.cached(f.inHeld + "/held") })
	for _, key := range []string{f.other + "/first", f.other + "/second"} {
		if f.cached(key) {
			t.Fatalf("%s, of a partition not held, is served", key)
		}
	}
	if n := f.seg.UnfilteredLists(); n != 0 {
		t.Fatalf("%d LISTs counted unfiltered; the server filtered them", n)
	}
	if n := f.calls.Load(); n != 2 {
		t.Fatalf("%d probes after the move; the mode is decided", n)
	}
}

// A probe at the first object that finds the server does not filter is
// final: the whole informer stays, and no later object is probed.
func TestSegmentedStaysWholeWhenTheProbeSaysSo(t *testing.T) {
	f := newReprobeFixture(t, shardprobe.Result{Reason: "the API server returned an object outside the shard selector"})
	f.create(f.inHeld, "first")
	f.await("the first probe", func() bool { return f.calls.Load() == 1 })
	f.create(f.inHeld, "second")
	f.await(f.inHeld+"/second cached", func() bool { return f.cached(f.inHeld + "/second") })
	if f.seg.Filtered() || f.seg.Segments() != 1 || f.selected.Load() != 0 {
		t.Fatalf("after a final probe: filtered %v, %d segments, %d LISTs with a selector; want the whole informer only", f.seg.Filtered(), f.seg.Segments(), f.selected.Load())
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("%d probes; the first was final", n)
	}
}
