package segmented_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/internal/cache/segmented"
	"github.com/kshard/kshard/shard"
	"github.com/kshard/kshard/shard/ring"
)

func TestNewSegmentedValidates(t *testing.T) {
	rp, err := shard.NewRangePartitioner(shard.SchemeNamespace, 8)
	if err != nil {
		t.Fatal(err)
	}
	lw := &toolscache.ListWatch{}
	good := segmented.Options{Partitioner: rp, ListWatch: lw, Example: &corev1.ConfigMap{}}
	for _, tc := range []struct {
		name   string
		mutate func(*segmented.Options)
		want   string
	}{
		{"no partitioner", func(o *segmented.Options) { o.Partitioner = shard.RangePartitioner{} }, "Partitioner"},
		{"no list-watch", func(o *segmented.Options) { o.ListWatch = nil }, "ListWatch"},
		{"no example", func(o *segmented.Options) { o.Example = nil }, "Example"},
		{"negative max", func(o *segmented.Options) { o.MaxSegments = -1 }, "MaxSegments"},
	} {
		o := good
		tc.mutate(&o)
		if _, err := segmented.New(o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
	s, err := segmented.New(good)
	if err != nil {
		t.Fatal(err)
	}
	// Before Run nothing is listed; what was asked is kept for Run.
	s.Hold(shard.NewPartitionSet(8, 1))
	if got := s.SyncedPartitions(); !got.IsEmpty() || s.Segments() != 0 {
		t.Fatalf("before Run: synced %v, %d segments", got, s.Segments())
	}
}

// The store view and handler registrations of a Segmented, over a fake
// API (no selector support: the fallback, filtered on the client): the
// view answers only for held partitions, refuses writes, and a removed
// handler hears nothing more.
func TestSegmentedStoreViewAndHandlerRemoval(t *testing.T) {
	rp, err := shard.NewRangePartitioner(shard.SchemeNamespace, 4)
	if err != nil {
		t.Fatal(err)
	}
	cs := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	held := shard.NewPartitionSet(4)
	var inHeld, other string // a namespace of a held partition, one of another
	for i := 0; inHeld == "" || other == ""; i++ {
		ns := fmt.Sprintf("ns-%d", i)
		p, _ := rp.PartitionOfObject(ns, "")
		switch {
		case p == 1 && inHeld == "":
			inHeld = ns
		case p != 1 && other == "":
			other = ns
		}
	}
	held.Add(1)
	for _, ns := range []string{inHeld, other} {
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return cs.CoreV1().ConfigMaps("").List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().ConfigMaps("").Watch(ctx, o)
		},
	}
	s, err := segmented.New(segmented.Options{Partitioner: rp, ListWatch: lw, Example: &corev1.ConfigMap{}})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan string, 16)
	reg, err := s.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { events <- "add " + obj.(*corev1.ConfigMap).Namespace },
		UpdateFunc: func(_, obj any) { events <- "update " + obj.(*corev1.ConfigMap).Namespace },
	})
	if err != nil || !reg.HasSynced() {
		t.Fatalf("AddEventHandler = %v (synced %v); want a registration synced at once", err, reg != nil && reg.HasSynced())
	}
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	s.Hold(held)
	if got := <-events; got != "add "+inHeld {
		t.Fatalf("first event %q, want the add of the held namespace %s", got, inHeld)
	}
	for !s.SyncedPartitions().Has(1) {
		<-s.Changed()
	}
	store := s.GetStore()
	if keys := store.ListKeys(); len(keys) != 1 || keys[0] != inHeld+"/a" {
		t.Fatalf("ListKeys = %v, want only %s/a", keys, inHeld)
	}
	if _, ok, _ := store.GetByKey(other + "/a"); ok {
		t.Fatalf("GetByKey found %s/a, which is in a partition not held", other)
	}
	if _, ok, err := store.Get(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: inHeld, Name: "a"}}); !ok || err != nil {
		t.Fatalf("Get of the held object: found %v, %v", ok, err)
	}
	if err := store.Add(&corev1.ConfigMap{}); err == nil {
		t.Fatal("Add on the read-only view succeeded")
	}
	if err := s.RemoveEventHandler(reg); err != nil {
		t.Fatal(err)
	}
	// An update after the removal reaches a second handler but not the first.
	second := make(chan string, 4)
	if _, err := s.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { second <- obj.(*corev1.ConfigMap).Namespace },
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(inHeld).Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: inHeld, Name: "a"}, Data: map[string]string{"k": "v"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := <-second; got != inHeld {
		t.Fatalf("second handler heard %q", got)
	}
	// A second update heard by the second handler: by then the first, had
	// it stayed registered, would have heard the first update.
	if _, err := cs.CoreV1().ConfigMaps(inHeld).Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: inHeld, Name: "a"}, Data: map[string]string{"k": "w"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	<-second
	select {
	case got := <-events:
		t.Fatalf("removed handler still heard %q", got)
	default:
	}
}

// A Segmented is what the ring coordinator holds partitions in.
var _ ring.PartitionCache = (*segmented.Segmented)(nil)
