package cache

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/internal/cache/segmented"
	"github.com/kshard/kshard/shard"
)

// ObjectsPerPartition over a Cache with a sharded kind (Secrets: the fake
// API ignores the selector and the client filters, so only held partitions
// are stored), a fallback kind (ConfigMaps: stored whole) and a kind cached
// whole (Services, as Sharding.Full would): exact counts per partition,
// nothing of the whole kind, and nil without Sharding.
func TestObjectsPerPartition(t *testing.T) {
	const parts = 4
	rp, err := shard.NewRangePartitioner(shard.SchemeNamespace, parts)
	if err != nil {
		t.Fatal(err)
	}
	// Two namespaces per partition, each with its own number of objects,
	// so a count credited to the wrong partition or kind shows.
	type space struct {
		ns                     string
		p                      int
		configMaps, secrets, n int
	}
	var spaces []space
	perPart := make([]int, parts)
	for i := 0; len(spaces) < 2*parts; i++ {
		ns := fmt.Sprintf("ns-%d", i)
		p, _ := rp.PartitionOfObject(ns, "")
		if perPart[p] == 2 {
			continue
		}
		perPart[p]++
		k := len(spaces)
		spaces = append(spaces, space{ns: ns, p: p, configMaps: 1 + k, secrets: 2*k + 1, n: 3})
	}
	cs := fake.NewClientset()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, sp := range spaces {
		for i := range max(sp.configMaps, sp.secrets, sp.n) {
			om := metav1.ObjectMeta{Namespace: sp.ns, Name: fmt.Sprintf("o-%d", i)}
			if i < sp.configMaps {
				if _, err := cs.CoreV1().ConfigMaps(sp.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: om}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if i < sp.secrets {
				if _, err := cs.CoreV1().Secrets(sp.ns).Create(ctx, &corev1.Secret{ObjectMeta: om}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if i < sp.n {
				if _, err := cs.CoreV1().Services(sp.ns).Create(ctx, &corev1.Service{ObjectMeta: om}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	unsharded, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := unsharded.ObjectsPerPartition(); got != nil {
		t.Fatalf("without Sharding: ObjectsPerPartition = %v, want nil", got)
	}
	c, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, Options{Sharding: &Sharding{Partitioner: rp}})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ObjectsPerPartition(); !slices.Equal(got, make([]int, parts)) {
		t.Fatalf("before any kind: ObjectsPerPartition = %v, want %d zeros", got, parts)
	}
	segmented := func(filtered bool, list func(context.Context, metav1.ListOptions) (runtime.Object, error), watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), example runtime.Object) *segmented.Segmented {
		s, err := segmented.New(segmented.Options{Partitioner: rp, Filtered: filtered, Example: example,
			ListWatch: &toolscache.ListWatch{ListWithContextFunc: list, WatchFuncWithContext: watchFn}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	secrets := segmented(true, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return cs.CoreV1().Secrets("").List(ctx, o)
	}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return cs.CoreV1().Secrets("").Watch(ctx, o)
	}, &corev1.Secret{})
	configMaps := segmented(false, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return cs.CoreV1().ConfigMaps("").List(ctx, o)
	}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return cs.CoreV1().ConfigMaps("").Watch(ctx, o)
	}, &corev1.ConfigMap{})
	services := corev1informers.NewServiceInformer(cs, "", 0, toolscache.Indexers{})
	c.informers[informerKey{gvk: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}}] = &entry{part: secrets, mode: KindMode{Mode: ModeSharded}}
	c.informers[informerKey{gvk: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}}] = &entry{part: configMaps, mode: KindMode{Mode: ModeFallback}}
	c.informers[informerKey{gvk: schema.GroupVersionKind{Version: "v1", Kind: "Service"}}] = &entry{informer: services, mode: KindMode{Mode: ModeFull, Reason: "listed in Sharding.Full"}}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Start(runCtx) }()
	defer func() { stop(); <-done }()

	held := shard.NewPartitionSet(parts, 1, 3)
	c.Hold(held)
	for !c.SyncedPartitions().Equal(held) || !services.HasSynced() {
		select {
		case <-c.Changed():
		case <-time.After(10 * time.Millisecond): // the Services informer signals nothing
		case <-ctx.Done():
			t.Fatalf("waiting for the cache to sync %v: synced %v", held, c.SyncedPartitions())
		}
	}
	if n := len(services.GetStore().ListKeys()); n != 3*len(spaces) {
		t.Fatalf("the whole kind stores %d Services, want %d", n, 3*len(spaces))
	}

	// Every partition's ConfigMaps (the fallback stores all), the held
	// partitions' Secrets, no Service.
	want := make([]int, parts)
	for _, sp := range spaces {
		want[sp.p] += sp.configMaps
		if held.Has(sp.p) {
			want[sp.p] += sp.secrets
		}
	}
	got := c.ObjectsPerPartition()
	if !slices.Equal(got, want) {
		t.Fatalf("ObjectsPerPartition = %v, want %v (held %v)", got, want, held)
	}
	// Over the held partitions it makes ObjectCounts' sharded figures.
	counts := c.ObjectCounts()
	sum := 0
	for _, p := range held.Slice() {
		sum += got[p]
	}
	if byKind := counts[schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}] + counts[schema.GroupVersionKind{Version: "v1", Kind: "Secret"}]; sum != byKind {
		t.Fatalf("ObjectsPerPartition sums to %d over the held partitions, ObjectCounts to %d for the sharded kinds", sum, byKind)
	}
}
