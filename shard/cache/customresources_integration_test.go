package cache_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kshard/kshard/cmd/example-operator/api/v1alpha1"
	"github.com/kshard/kshard/internal/cache/cachetest"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
	"github.com/kshard/kshard/shard"
	"github.com/kshard/kshard/shard/cache"
)

// crFixture is a control plane with two custom resource kinds: the example
// operator's Widget (demo.kshard.io/v1alpha1), with objects in many
// namespaces, and the test's Widget (example.kshard.io/v1), empty; and a
// Cache sharded by namespace, holding some of the partitions.
type crFixture struct {
	t     *testing.T
	ctx   context.Context
	dyn   dynamic.Interface
	rp    shard.RangePartitioner
	held  shard.PartitionSet
	cache *cache.Cache
	keys  []string // the demo Widgets created, sorted
}

var demoWidgets = v1alpha1.GroupVersion.WithResource("widgets")

func newCRFixture(t *testing.T, gate bool) *crFixture {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real control plane; skipped with -short")
	}
	cp := controlplane.ForTest(t, controlplane.Options{ShardedListAndWatch: gate})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	f := &crFixture{t: t, ctx: ctx, dyn: dynamic.NewForConfigOrDie(cp.Config())}
	demoCRD := &unstructured.Unstructured{}
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(v1alpha1.CRD), 4096).Decode(&demoCRD.Object); err != nil {
		t.Fatal(err)
	}
	cachetest.CreateCRD(t, ctx, f.dyn, demoCRD)
	cachetest.CreateCRD(t, ctx, f.dyn, cachetest.WidgetCRD())
	for _, gvr := range []schema.GroupVersionResource{demoWidgets, cachetest.WidgetGV.WithResource("widgets")} {
		await(t, gvr.String()+" served", func() bool {
			_, err := f.dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
			return err == nil
		})
	}
	cs := kubernetes.NewForConfigOrDie(cp.Config())
	for i := range 12 {
		ns := fmt.Sprintf("n%d-crprobe", i) // the varying part first: see createShardingFixture
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for j := range 3 {
			f.keys = append(f.keys, f.create(demoWidgets, ns, fmt.Sprintf("w-%d", j)))
		}
	}
	slices.Sort(f.keys)

	var err error
	if f.rp, err = shard.NewRangePartitioner(shard.SchemeNamespace, 8); err != nil {
		t.Fatal(err)
	}
	f.held = shard.NewPartitionSet(8, 0, 2, 3, 6)
	s := widgetScheme(t)
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if f.cache, err = cache.New(cp.Config(), cache.Options{Scheme: s, Sharding: &cache.Sharding{Partitioner: f.rp, Logger: testr.New(t)}}); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = f.cache.Start(runCtx) })
	t.Cleanup(func() { stop(); wg.Wait() })
	f.cache.Hold(f.held)
	if want := f.inHeld(f.keys); len(want) == 0 || len(want) == len(f.keys) {
		t.Fatalf("%d of %d Widgets in the held partitions; the fixture does not exercise the filter", len(want), len(f.keys))
	}
	return f
}

// create creates an object of gvr and returns its key.
func (f *crFixture) create(gvr schema.GroupVersionResource, ns, name string) string {
	f.t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": "Widget",
		"metadata": map[string]any{"namespace": ns, "name": name},
	}}
	if _, err := f.dyn.Resource(gvr).Namespace(ns).Create(f.ctx, obj, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	return shard.KeyOf(ns, name)
}

// inHeld returns the keys whose namespace is in a held partition.
func (f *crFixture) inHeld(keys []string) []string {
	var out []string
	for _, k := range keys {
		if f.held.Has(f.rp.Partition(k)) { // the key's namespace decides
			out = append(out, k)
		}
	}
	return out
}

// namespaceOf returns a namespace n<i>-crprobe in a held partition, or not.
func (f *crFixture) namespaceOf(held bool) string {
	for i := range 12 {
		ns := fmt.Sprintf("n%d-crprobe", i)
		if p, _ := f.rp.PartitionOfObject(ns, ""); f.held.Has(p) == held {
			return ns
		}
	}
	f.t.Fatalf("no fixture namespace with held=%v", held)
	return ""
}

// mode returns the cache's report of the kind.
func (f *crFixture) mode(kind schema.GroupVersionKind) cache.KindMode {
	for _, m := range f.cache.ModeReport() {
		if m.Kind == kind {
			return m
		}
	}
	f.t.Fatalf("no cache mode reported for %s: %+v", kind, f.cache.ModeReport())
	return cache.KindMode{}
}

// cached lists the objects the cache serves for list (all namespaces).
func (f *crFixture) cached(list runtime.Object) []string {
	f.t.Helper()
	if err := f.cache.List(f.ctx, list, ""); err != nil {
		f.t.Fatal(err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		f.t.Fatal(err)
	}
	var keys []string
	for _, it := range items {
		m, err := meta.Accessor(it)
		if err != nil {
			f.t.Fatal(err)
		}
		keys = append(keys, shard.KeyOf(m.GetNamespace(), m.GetName()))
	}
	slices.Sort(keys)
	return keys
}

var (
	demoWidgetKind    = v1alpha1.GroupVersion.WithKind("Widget")
	exampleWidgetKind = cachetest.WidgetGV.WithKind("Widget")
)

// With the gate on, a custom resource kind is sharded: the probe finds the
// server filters it although it echoes no ShardInfo, and the cache lists
// and holds only the held partitions' Widgets. A custom resource kind with
// no object yet starts in the fallback (nothing to test the filter on),
// and its first object, wherever it lands, has it probed again and moved
// to sharded, the held partitions staying synced.
func TestIntegrationCustomResourcesSharded(t *testing.T) {
	f := newCRFixture(t, true)
	if _, err := f.cache.Informer(f.ctx, &v1alpha1.Widget{}); err != nil {
		t.Fatal(err)
	}
	if m := f.mode(demoWidgetKind); m.Mode != cache.ModeSharded || m.Reason != "" {
		t.Fatalf("%s: mode %s (%s), want sharded", demoWidgetKind, m.Mode, m.Reason)
	}
	want := f.inHeld(f.keys)
	await(t, "the held partitions synced", func() bool { return f.cache.SyncedPartitions().Equal(f.held) })
	await(t, "the held Widgets cached", func() bool { return slices.Equal(f.cached(&v1alpha1.WidgetList{}), want) })
	if n := f.mode(demoWidgetKind).ObjectsListed; n > int64(len(want)) {
		t.Fatalf("the server returned %d Widgets to the cache's LISTs; the held partitions have %d (of %d): it did not filter", n, len(want), len(f.keys))
	}
	t.Logf("%s sharded: caches %d of %d Widgets", demoWidgetKind, len(want), len(f.keys))

	// The empty kind.
	if _, err := f.cache.Informer(f.ctx, &Widget{}); err != nil {
		t.Fatal(err)
	}
	if m := f.mode(exampleWidgetKind); m.Mode != cache.ModeFallback || !strings.Contains(m.Reason, "no widgets.example.kshard.io exists") {
		t.Fatalf("%s with no object: mode %s (%s), want fallback until its first object", exampleWidgetKind, m.Mode, m.Reason)
	}
	await(t, "the held partitions synced for the empty kind", func() bool { return f.cache.SyncedPartitions().Equal(f.held) })
	examples := cachetest.WidgetGV.WithResource("widgets")
	away := f.create(examples, f.namespaceOf(false), "first")
	await(t, exampleWidgetKind.String()+" sharded after its first object", func() bool {
		if !f.cache.SyncedPartitions().Equal(f.held) {
			t.Fatalf("held partitions not synced while the kind moves: %v", f.cache.SyncedPartitions())
		}
		return f.mode(exampleWidgetKind).Mode == cache.ModeSharded
	})
	if m := f.mode(exampleWidgetKind); m.Reason != "" {
		t.Fatalf("%s sharded with reason %q", exampleWidgetKind, m.Reason)
	}
	home := f.create(examples, f.namespaceOf(true), "second")
	await(t, home+" cached", func() bool { return slices.Equal(f.cached(&WidgetList{}), []string{home}) })
	if got := f.cached(&WidgetList{}); slices.Contains(got, away) {
		t.Fatalf("%s, of a partition not held, is served: %v", away, got)
	}
	ns, name, _ := strings.Cut(away, "/")
	if err := f.cache.Get(f.ctx, types.NamespacedName{Namespace: ns, Name: name}, &Widget{}); !errors.Is(err, cache.ErrPartitionNotHeld) {
		t.Fatalf("Get(%s), of a partition not held = %v, want ErrPartitionNotHeld", away, err)
	}
}

// With the gate off, the same kinds fall back, and say why: the populated
// one at once, the empty one at its first object; the cache still serves
// only the held partitions (the client-side check).
func TestIntegrationCustomResourcesFallBackWithoutTheGate(t *testing.T) {
	f := newCRFixture(t, false)
	if _, err := f.cache.Informer(f.ctx, &v1alpha1.Widget{}); err != nil {
		t.Fatal(err)
	}
	if m := f.mode(demoWidgetKind); m.Mode != cache.ModeFallback || !strings.Contains(m.Reason, "does not filter") {
		t.Fatalf("%s without the gate: mode %s (%s), want fallback naming the unfiltered answer", demoWidgetKind, m.Mode, m.Reason)
	}
	want := f.inHeld(f.keys)
	await(t, "the held Widgets cached", func() bool { return slices.Equal(f.cached(&v1alpha1.WidgetList{}), want) })

	if _, err := f.cache.Informer(f.ctx, &Widget{}); err != nil {
		t.Fatal(err)
	}
	if m := f.mode(exampleWidgetKind); m.Mode != cache.ModeFallback || !strings.Contains(m.Reason, "no widgets.example.kshard.io exists") {
		t.Fatalf("%s with no object: mode %s (%s), want fallback until its first object", exampleWidgetKind, m.Mode, m.Reason)
	}
	f.create(cachetest.WidgetGV.WithResource("widgets"), f.namespaceOf(true), "first")
	await(t, exampleWidgetKind.String()+" probed again at its first object", func() bool {
		return strings.Contains(f.mode(exampleWidgetKind).Reason, "does not filter")
	})
	if m := f.mode(exampleWidgetKind); m.Mode != cache.ModeFallback {
		t.Fatalf("%s without the gate after its first object: mode %s, want fallback", exampleWidgetKind, m.Mode)
	}
}
