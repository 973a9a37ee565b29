package crshard

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	crmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
	"github.com/kshard/kshard/shard"
	kcache "github.com/kshard/kshard/shard/cache"
)

const (
	cacheTestNS         = "work"
	cacheTestLeaseNS    = "ring"
	cacheTestPartitions = 32
	cacheTestObjects    = 60
)

// reconciles records what the replicas' reconcilers saw: per key and
// replica the versions read (data "v"), overlaps (two reconciles of one key
// at once) and failed reads.
type reconciles struct {
	mu       sync.Mutex
	seen     map[string]map[string][]string // key -> replica -> versions read
	inFlight map[string]string              // key -> replica reconciling it now
	overlaps []string
	failures []string
}

func newReconciles() *reconciles {
	return &reconciles{seen: map[string]map[string][]string{}, inFlight: map[string]string{}}
}

func (rs *reconciles) reconciler(id string, c client.Client) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		key := req.String()
		rs.mu.Lock()
		if other, busy := rs.inFlight[key]; busy {
			rs.overlaps = append(rs.overlaps, fmt.Sprintf("%s reconciled by %s and %s at once", key, other, id))
		}
		rs.inFlight[key] = id
		rs.mu.Unlock()
		defer func() {
			rs.mu.Lock()
			delete(rs.inFlight, key)
			rs.mu.Unlock()
		}()
		var cm corev1.ConfigMap
		err := c.Get(ctx, req.NamespacedName, &cm)
		time.Sleep(2 * time.Millisecond) // widen the window an overlap would show in
		rs.mu.Lock()
		defer rs.mu.Unlock()
		if err != nil {
			rs.failures = append(rs.failures, fmt.Sprintf("%s: reading %s: %v", id, key, err))
			return reconcile.Result{}, nil
		}
		if rs.seen[key] == nil {
			rs.seen[key] = map[string][]string{}
		}
		rs.seen[key][id] = append(rs.seen[key][id], cm.Data["v"])
		return reconcile.Result{}, nil
	})
}

// readers returns, per key, the replicas that read version v of it.
func (rs *reconciles) readers(v string) map[string][]string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	out := map[string][]string{}
	for key, by := range rs.seen {
		for id, vs := range by {
			for _, got := range vs {
				if got == v {
					out[key] = append(out[key], id)
					break
				}
			}
		}
	}
	return out
}

func (rs *reconciles) check(t *testing.T) {
	t.Helper()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, o := range rs.overlaps {
		t.Error(o)
	}
	for _, f := range rs.failures {
		t.Error(f)
	}
}

// cacheReplica is one crshard replica: a controller-runtime manager on
// the ring's sharded cache.
type cacheReplica struct {
	id   string
	ring *Ring
	mgr  crmanager.Manager
	reg  *prometheus.Registry
	stop context.CancelFunc
	done chan error
}

// startCacheReplica builds replica id and starts it, after calling each of
// beforeStart with its manager.
func startCacheReplica(t *testing.T, cfg *rest.Config, id string, rs *reconciles, beforeStart ...func(crmanager.Manager)) *cacheReplica {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	reg := prometheus.NewRegistry()
	ring, err := New(cfg, Options{
		Ring: "cachetest", LeaseNamespace: cacheTestLeaseNS, Identity: id, Partitions: cacheTestPartitions,
		LeaseDuration: 4 * time.Second, RenewPeriod: 500 * time.Millisecond, DrainGracePeriod: time.Second,
		GracefulShutdownTimeout: 20 * time.Second, CacheMode: CacheLabels, Registerer: reg, CacheCheckInterval: time.Second,
		Exit:   func(code int) { t.Errorf("replica %s asked to exit with %d", id, code) },
		Logger: testr.NewWithOptions(t, testr.Options{Verbosity: 1}).WithName(id),
	})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := crmanager.New(cfg, crmanager.Options{
		NewCache: ring.NewCache,
		Metrics:  metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.ConfigMap{}, "data.v", func(o client.Object) []string {
		return []string{o.(*corev1.ConfigMap).Data["v"]}
	}); err != nil {
		t.Fatal(err)
	}
	// Kinds it cannot shard, beside one it can: Namespaces are
	// cluster-scoped, ServiceAccounts reach the controller through a map
	// function; Secrets are owned (labelled by their controller owner's
	// partition). The map function maps nothing: only the modes matter.
	none := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return nil })
	if err := ring.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Owns(&corev1.Secret{}).
		Watches(&corev1.Namespace{}, none).Watches(&corev1.ServiceAccount{}, none).
		Complete(rs.reconciler(id, mgr.GetClient())); err != nil {
		t.Fatal(err)
	}
	// The same kind as unstructured objects: a cache of its own, labelled
	// by the same rule.
	if err := ring.NewControllerManagedBy(mgr).Named("configmap-unstructured").For(unstructuredConfigMap()).
		Complete(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })); err != nil {
		t.Fatal(err)
	}
	for _, f := range beforeStart {
		f(mgr)
	}
	ctx, stop := context.WithCancel(context.Background())
	r := &cacheReplica{id: id, ring: ring, mgr: mgr, reg: reg, stop: stop, done: make(chan error, 1)}
	go func() { r.done <- mgr.Start(ctx) }()
	t.Cleanup(func() { r.halt(t) })
	return r
}

func unstructuredConfigMap() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	return u
}

// halt stops the replica's manager (the ring leaves gracefully) and waits.
func (r *cacheReplica) halt(t *testing.T) {
	if r.stop == nil {
		return
	}
	r.stop()
	r.stop = nil
	if err := <-r.done; err != nil {
		t.Errorf("replica %s: %v", r.id, err)
	}
}

// active returns the partitions active on r.
func (r *cacheReplica) active() shard.PartitionSet {
	set := shard.NewPartitionSet(cacheTestPartitions)
	for p := range cacheTestPartitions {
		if r.ring.gate.Active(p) {
			set.Add(p)
		}
	}
	return set
}

// cached lists the test namespace's ConfigMaps in r's cache.
func (r *cacheReplica) cached(ctx context.Context, opts ...client.ListOption) ([]corev1.ConfigMap, error) {
	var list corev1.ConfigMapList
	err := r.mgr.GetCache().List(ctx, &list, append([]client.ListOption{client.InNamespace(cacheTestNS)}, opts...)...)
	return list.Items, err
}

// converged: every partition active on exactly one of rs, each of rs runs
// some, and each caches exactly the test ConfigMaps of its active
// partitions.
func converged(ctx context.Context, parts shard.Partitioner, rs ...*cacheReplica) (bool, string) {
	total := 0
	sets := make([]shard.PartitionSet, len(rs))
	for i, r := range rs {
		sets[i] = r.active()
		total += sets[i].Len()
	}
	union := shard.NewPartitionSet(cacheTestPartitions)
	for _, s := range sets {
		union = union.Union(s)
	}
	if total != cacheTestPartitions || union.Len() != cacheTestPartitions {
		return false, fmt.Sprintf("%d partitions active in all, %d distinct", total, union.Len())
	}
	// Every replica named runs a share: a replica that has not joined yet
	// would otherwise pass (its peer still runs everything), and the move
	// to it would come later, under the next updates.
	for i, s := range sets {
		if s.IsEmpty() {
			return false, fmt.Sprintf("%s runs no partition yet", rs[i].id)
		}
	}
	state := ""
	for i, r := range rs {
		items, err := r.cached(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, cm := range items {
			if !sets[i].Has(parts.Partition(shard.KeyOf(cm.Namespace, cm.Name))) {
				return false, fmt.Sprintf("%s caches %s of a partition it does not run", r.id, cm.Name)
			}
		}
		state += fmt.Sprintf("%s caches %d; ", r.id, len(items))
	}
	return true, state
}

// TestShardedCacheInControllerRuntime runs two crshard replicas whose
// controller-runtime managers use the ring's sharded cache (CacheMode
// labels) on a stock API server: each caches only its partitions'
// ConfigMaps, every update is reconciled by exactly one replica, reads of
// partitions not held fail clearly, and a handoff (one replica leaves, then
// comes back) misses no update.
func TestShardedCacheInControllerRuntime(t *testing.T) {
	cp := controlplane.ForTest(t, controlplane.Options{})
	cfg := cp.Config()
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for _, ns := range []string{cacheTestNS, cacheTestLeaseNS} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	names := make([]string, cacheTestObjects)
	for i := range names {
		names[i] = "cm-" + strconv.Itoa(i)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: names[i], Namespace: cacheTestNS}, Data: map[string]string{"v": "1"}}
		if _, err := cs.CoreV1().ConfigMaps(cacheTestNS).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setAll := func(v string) {
		t.Helper()
		patch := []byte(fmt.Sprintf(`{"data":{"v":%q}}`, v))
		for _, n := range names {
			if _, err := cs.CoreV1().ConfigMaps(cacheTestNS).Patch(ctx, n, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// everyRead: every object's version v was read by exactly one replica,
	// when exactly is true, or by one at least.
	everyRead := func(rs *reconciles, v string, exactly bool) func() (bool, string) {
		return func() (bool, string) {
			readers := rs.readers(v)
			for _, n := range names {
				ids := readers[cacheTestNS+"/"+n]
				if len(ids) == 0 {
					return false, fmt.Sprintf("%s v%s not reconciled yet (%d of %d are)", n, v, len(readers), len(names))
				}
				if exactly && len(ids) > 1 {
					return false, fmt.Sprintf("%s v%s reconciled by %v", n, v, ids)
				}
			}
			return true, ""
		}
	}
	parts := shard.NewPartitioner(cacheTestPartitions)
	rs := newReconciles()
	a := startCacheReplica(t, cfg, "a", rs)
	b := startCacheReplica(t, cfg, "b", rs)

	waitFor(t, time.Minute, "two replicas to split the ring and their caches", func() (bool, string) { return converged(ctx, parts, a, b) })
	key, _ := shard.PartitionLabelKey("cachetest", shard.Config{Partitions: cacheTestPartitions})
	waitFor(t, time.Minute, "every ConfigMap labelled", func() (bool, string) {
		list, err := cs.CoreV1().ConfigMaps(cacheTestNS).List(ctx, metav1.ListOptions{LabelSelector: key})
		if err != nil {
			return false, err.Error()
		}
		return len(list.Items) == cacheTestObjects, fmt.Sprintf("%d labelled", len(list.Items))
	})
	itemsA, _ := a.cached(ctx)
	itemsB, _ := b.cached(ctx)
	t.Logf("split: a caches %d, b caches %d of %d ConfigMaps", len(itemsA), len(itemsB), cacheTestObjects)
	if len(itemsA)+len(itemsB) != cacheTestObjects || len(itemsA) == 0 || len(itemsB) == 0 {
		t.Fatalf("a caches %d and b %d ConfigMaps; want a split of %d", len(itemsA), len(itemsB), cacheTestObjects)
	}

	// Unstructured and metadata-only reads: the unstructured ConfigMaps are
	// sharded as the typed ones; metadata-only ConfigMaps, which no
	// controller watches, are cached whole.
	waitFor(t, 30*time.Second, "a's unstructured ConfigMaps to be its typed ones", func() (bool, string) {
		ul := &unstructured.UnstructuredList{}
		ul.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
		if err := a.mgr.GetCache().List(ctx, ul, client.InNamespace(cacheTestNS)); err != nil {
			return false, err.Error()
		}
		return len(ul.Items) == len(itemsA), fmt.Sprintf("%d unstructured, %d typed", len(ul.Items), len(itemsA))
	})
	ml := &metav1.PartialObjectMetadataList{}
	ml.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := a.mgr.GetCache().List(ctx, ml, client.InNamespace(cacheTestNS)); err != nil || len(ml.Items) != cacheTestObjects {
		t.Fatalf("a lists %d metadata-only ConfigMaps (%v), want all %d: no controller watches them, so they are cached whole", len(ml.Items), err, cacheTestObjects)
	}

	// Every update reconciled by exactly one replica.
	setAll("2")
	waitFor(t, time.Minute, "every v2 reconciled once", everyRead(rs, "2", true))
	rs.check(t)

	// Selectors: labels and an indexed field, ANDed with the shard's.
	cmA := itemsA[0]
	if _, err := cs.CoreV1().ConfigMaps(cacheTestNS).Patch(ctx, cmA.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"pick":"me"}},"data":{"v":"odd"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "a to see its picked ConfigMap by label and by field", func() (bool, string) {
		byLabel, err := a.cached(ctx, client.MatchingLabels{"pick": "me"})
		if err != nil {
			return false, err.Error()
		}
		byField, err := a.cached(ctx, client.MatchingFields{"data.v": "odd"})
		if err != nil {
			return false, err.Error()
		}
		return len(byLabel) == 1 && byLabel[0].Name == cmA.Name && len(byField) == 1 && byField[0].Name == cmA.Name,
			fmt.Sprintf("by label %d, by field %d", len(byLabel), len(byField))
	})
	if got, err := b.cached(ctx, client.MatchingFields{"data.v": "odd"}); err != nil || len(got) != 0 {
		t.Fatalf("b lists %d ConfigMaps with v=odd (%v); the one is in a's partitions", len(got), err)
	}
	if got, err := a.cached(ctx, client.MatchingFields{"data.v": "2"}); err != nil || len(got) != len(itemsA)-1 {
		t.Fatalf("a lists %d ConfigMaps with v=2 (%v), want its %d less the picked one", len(got), err, len(itemsA)-1)
	}
	// A read of another replica's partition fails clearly, never NotFound.
	var cm corev1.ConfigMap
	err := b.mgr.GetCache().Get(ctx, client.ObjectKeyFromObject(&cmA), &cm)
	if !errors.Is(err, kcache.ErrPartitionNotHeld) {
		t.Fatalf("b reading a's %s: %v, want ErrPartitionNotHeld", cmA.Name, err)
	}
	if err := a.mgr.GetCache().Get(ctx, client.ObjectKeyFromObject(&cmA), &cm); err != nil || cm.Data["v"] != "odd" || cm.Kind != "ConfigMap" {
		t.Fatalf("a reading its %s: %v, %+v", cmA.Name, err, cm.TypeMeta)
	}

	// Handoff: b leaves while updates flow; a takes every partition and
	// misses none.
	left := make(chan struct{})
	go func() { b.halt(t); close(left) }()
	setAll("3")
	<-left
	waitFor(t, time.Minute, "a to run the whole ring and cache every ConfigMap", func() (bool, string) { return converged(ctx, parts, a) })
	waitFor(t, time.Minute, "every v3 reconciled", everyRead(rs, "3", false))
	itemsA, _ = a.cached(ctx)
	t.Logf("alone: a caches %d of %d ConfigMaps", len(itemsA), cacheTestObjects)

	// b comes back: the ring splits again, and updates during the move are
	// reconciled.
	b = startCacheReplica(t, cfg, "b", rs)
	setAll("4")
	waitFor(t, time.Minute, "two replicas to split again", func() (bool, string) { return converged(ctx, parts, a, b) })
	waitFor(t, time.Minute, "every v4 reconciled", everyRead(rs, "4", false))
	setAll("5")
	waitFor(t, time.Minute, "every v5 reconciled once", everyRead(rs, "5", true))
	itemsA, _ = a.cached(ctx)
	itemsB, _ = b.cached(ctx)
	t.Logf("split again: a caches %d, b caches %d of %d ConfigMaps", len(itemsA), len(itemsB), cacheTestObjects)
	rs.check(t)
	// kshard status reads each replica's cache mode and count from its Lease.
	waitFor(t, 30*time.Second, "b's Lease to publish its cache", func() (bool, string) {
		l, err := cs.CoordinationV1().Leases(cacheTestLeaseNS).Get(ctx, lease.LeaseName("cachetest", "b"), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		n, _ := strconv.Atoi(l.Annotations[annotationCachedObjects])
		return l.Annotations[annotationCacheMode] == string(CacheLabels) && n >= len(itemsB), fmt.Sprintf("annotations %v", l.Annotations)
	})
	// The kshard_cache_* metrics, as the native manager's.
	gather := func() map[string]float64 {
		mfs, err := b.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		metrics := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				var ls []string
				for _, l := range m.GetLabel() {
					ls = append(ls, l.GetName()+"="+l.GetValue())
				}
				metrics[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
		return metrics
	}
	metrics := gather()
	if v := metrics["kshard_cache_mode{group=,kind=/v1, Kind=ConfigMap,kind_name=ConfigMap,mode=labels,version=v1}"]; v != 1 {
		t.Errorf("kshard_cache_mode of ConfigMaps = %v, want 1 for labels", v)
	}
	if v := metrics["kshard_cache_objects{group=,kind=/v1, Kind=ConfigMap,kind_name=ConfigMap,version=v1}"]; v < float64(len(itemsB)) {
		t.Errorf("kshard_cache_objects of ConfigMaps = %v, want at least b's %d", v, len(itemsB))
	}
	// The self-check runs behind the adapter too (every second here) and
	// finds nothing missing in a healthy replica.
	waitFor(t, 30*time.Second, "b's self-check of ConfigMaps to run twice", func() (bool, string) {
		m := gather()
		checks, missing := m["kshard_cache_checks_total{group=,kind=/v1, Kind=ConfigMap,kind_name=ConfigMap,version=v1}"], m["kshard_cache_missing_objects{group=,kind=/v1, Kind=ConfigMap,kind_name=ConfigMap,version=v1}"]
		if missing != 0 {
			t.Fatalf("b's self-check found %v ConfigMaps missing from its cache", missing)
		}
		return checks >= 2, fmt.Sprintf("%v checks", checks)
	})
	want := map[string]struct{ mode, reason string }{
		"ConfigMap":                {kcache.ModeLabels, ""},
		"ConfigMap (unstructured)": {kcache.ModeLabels, ""},
		"ConfigMap (metadata)":     {kcache.ModeFull, "no controller watches it"},
		"Secret":                   {kcache.ModeLabels, ""},
		"Namespace":                {kcache.ModeFull, "cluster-scoped"},
		"ServiceAccount":           {kcache.ModeFull, "maps its events with a function"},
	}
	modes := a.mgr.GetCache().(*shardedCache).Modes()
	for _, m := range modes {
		w, ok := want[m.Kind.Kind]
		if !ok {
			continue
		}
		delete(want, m.Kind.Kind)
		if m.Mode != w.mode || !strings.Contains(m.Reason, w.reason) {
			t.Errorf("%s cached in mode %s (%q), want %s (%q)", m.Kind.Kind, m.Mode, m.Reason, w.mode, w.reason)
		}
	}
	for kind := range want {
		t.Errorf("no mode reported for %s: %+v", kind, modes)
	}
}
