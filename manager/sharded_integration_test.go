package manager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kshard/kshard/internal/assign"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/internal/testwait"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
	"github.com/kshard/kshard/shard"
	"github.com/kshard/kshard/shard/cache"
)

// shardedRing starts a control plane (gate: ShardedListAndWatch), the
// Lease namespace "it" and namespaces n0-sharded … with perNS
// ConfigMaps each, and returns the keys of every ConfigMap on the server.
func shardedRing(t *testing.T, gate bool, spaces, perNS int) (*rest.Config, kubernetes.Interface, []string) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test (starts an API server); -short runs unit tests only")
	}
	cfg := controlplane.ForTest(t, controlplane.Options{ShardedListAndWatch: gate}).Config()
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	for i := -1; i < spaces; i++ {
		ns := shardedNS(i)
		if i < 0 {
			ns = "it"
		}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if i >= 0 {
			createConfigMaps(t, cs, ns, perNS)
		}
	}
	return cfg, cs, serverKeys(t, cs)
}

// serverKeys lists every ConfigMap on the server, sorted.
func serverKeys(t *testing.T, cs kubernetes.Interface) []string {
	t.Helper()
	l, err := cs.CoreV1().ConfigMaps("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, cm := range l.Items {
		keys = append(keys, cm.Namespace+"/"+cm.Name)
	}
	sort.Strings(keys)
	return keys
}

// cachedKeys lists the ConfigMaps in r's cache, sorted.
func cachedKeys(t *testing.T, r *replica) []string {
	t.Helper()
	var l corev1.ConfigMapList
	if err := r.mgr.GetCache().List(context.Background(), &l, ""); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, cm := range l.Items {
		keys = append(keys, cm.Namespace+"/"+cm.Name)
	}
	sort.Strings(keys)
	return keys
}

// shardedNS names the i-th object namespace: the number first, since names
// that differ only at the end share a partition (shard/README.md, "Balance").
func shardedNS(i int) string { return fmt.Sprintf("n%d-sharded", i) }

func shardedByNamespace(o *Options) {
	o.PartitionBy = shard.SchemeNamespace
	o.Partitions = 16
	o.WatchNamespace = ""
}

// With PartitionBy namespace and the API server's sharded list/watch on,
// each replica caches only the namespaces of its partitions: the two caches
// are disjoint and together hold every object; a Get of another replica's
// namespace fails with ErrPartitionNotHeld (not NotFound); after a leave
// the survivor lists the moved partitions, caches everything and
// reconciles every key, with no reconcile on two replicas at once.
func TestShardedCacheHoldsOnlyItsPartitions(t *testing.T) {
	ctx := context.Background()
	cfg, cs, all := shardedRing(t, true, 12, 5)
	j := &journal{}
	log0 := &logLines{}
	r0 := startReplica(t, cfg, "it", "r-0", j, 10*time.Millisecond, shardedByNamespace, log0.into(t, "r-0"))
	r1 := startReplica(t, cfg, "it", "r-1", j, 10*time.Millisecond, shardedByNamespace)
	testwait.For(t, 30*time.Second, "two replicas to split the ring", func() (bool, string) { return ringSettled(ctx, cs, "it", "r-0", "r-1") })
	testwait.For(t, 30*time.Second, "every key reconciled", func() (bool, string) {
		seen := map[string]bool{}
		for _, iv := range j.snapshot() {
			seen[iv.key] = true
		}
		return len(seen) >= len(all), fmt.Sprintf("%d of %d keys", len(seen), len(all))
	})
	var k0, k1 []string
	testwait.For(t, 10*time.Second, "the caches to hold disjoint halves of every object", func() (bool, string) {
		k0, k1 = cachedKeys(t, r0), cachedKeys(t, r1)
		union := map[string]int{}
		for _, k := range append(append([]string(nil), k0...), k1...) {
			union[k]++
		}
		for k, n := range union {
			if n > 1 {
				return false, k + " is in both caches"
			}
		}
		return len(union) == len(all) && len(k0) > 0 && len(k1) > 0, fmt.Sprintf("r-0 %d, r-1 %d of %d", len(k0), len(k1), len(all))
	})
	t.Logf("r-0 caches %d, r-1 %d of %d ConfigMaps", len(k0), len(k1), len(all))
	for r, keys := range map[*replica][]string{r0: k0, r1: k1} {
		modes := r.mgr.GetCache().ModeReport()
		if len(modes) != 1 || modes[0].Mode != cache.ModeSharded {
			t.Fatalf("%s: cache modes %+v, want ConfigMaps sharded", r.mgr.Identity(), modes)
		}
		_, body := get("http://" + r.mgr.MetricsAddr() + "/metrics")
		if !strings.Contains(body, `kshard_cache_mode{group="",kind="/v1, Kind=ConfigMap",kind_name="ConfigMap",mode="sharded",version="v1"} 1`) {
			t.Errorf("%s: /metrics has no kshard_cache_mode line for sharded ConfigMaps", r.mgr.Identity())
		}
		// kshard_cache_objects may be up to cachemetrics' refresh period
		// (5 s) old (the Lease's cached-objects annotation counted it while
		// the caches filled): awaited, not read once.
		line := fmt.Sprintf(`kshard_cache_objects{group="",kind="/v1, Kind=ConfigMap",kind_name="ConfigMap",version="v1"} %d`, len(keys))
		testwait.For(t, 15*time.Second, r.mgr.Identity()+"'s /metrics to count its cached ConfigMaps", func() (bool, string) {
			_, body := get("http://" + r.mgr.MetricsAddr() + "/metrics")
			return strings.Contains(body, line), "no line " + line
		})
		// Per partition: each synced partition counts the ConfigMaps the
		// test created in it (by the ring's partition function, not the
		// cache), and together they make kshard_cache_objects.
		rp, err := shard.NewRangePartitioner(shard.SchemeNamespace, 16)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]int, rp.Count())
		for _, k := range all {
			want[rp.Partition(k)]++ // the key's namespace decides
		}
		synced := r.mgr.GetCache().SyncedPartitions()
		perPart := r.mgr.GetCache().ObjectsPerPartition()
		if len(perPart) != rp.Count() {
			t.Fatalf("%s: ObjectsPerPartition has %d partitions, want %d", r.mgr.Identity(), len(perPart), rp.Count())
		}
		sum := 0
		for _, p := range synced.Slice() {
			if perPart[p] != want[p] {
				t.Errorf("%s: ObjectsPerPartition()[%d] = %d, want %d", r.mgr.Identity(), p, perPart[p], want[p])
			}
			sum += perPart[p]
		}
		if sum != len(keys) {
			t.Errorf("%s: ObjectsPerPartition sums to %d over the synced partitions %v, kshard_cache_objects is %d", r.mgr.Identity(), sum, synced.Slice(), len(keys))
		}
	}
	// A key r-1 holds, read through r-0's cache.
	ns, name, _ := strings.Cut(k1[0], "/")
	err := r0.mgr.GetCache().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &corev1.ConfigMap{})
	if !errors.Is(err, cache.ErrPartitionNotHeld) {
		t.Fatalf("r-0 reading %s held by r-1: %v, want ErrPartitionNotHeld", k1[0], err)
	}
	ns, name, _ = strings.Cut(k0[0], "/")
	if err := r0.mgr.GetCache().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("r-0 reading its own %s: %v", k0[0], err)
	}
	listedBefore := r1.mgr.GetCache().ModeReport()[0].ObjectsListed

	mark := len(j.snapshot())
	leaveStart := time.Now()
	r0.stop(t)
	t.Logf("r-0's graceful leave took %s", time.Since(leaveStart).Round(time.Millisecond))
	// A graceful leave waits for nothing of the sharded cache: shown by
	// what it did, not how long it took. It ended by deleting its Lease
	// (its last step) before Start returned, not by running out of the
	// manager's shutdown timeout (20s here).
	if del, late := log0.count("left the ring: Lease deleted"), log0.count("graceful leave did not finish in time"); del != 1 || late != 0 {
		t.Errorf("r-0's graceful leave: %d Lease deletions, %d shutdown timeouts; want 1 and 0", del, late)
	}
	testwait.For(t, 15*time.Second, "r-1 alone to own the ring", func() (bool, string) { return ringSettled(ctx, cs, "it", "r-1") })
	testwait.For(t, 10*time.Second, "r-1 to cache every object", func() (bool, string) {
		got := cachedKeys(t, r1)
		return len(got) == len(all), fmt.Sprintf("%d of %d", len(got), len(all))
	})
	for i := 0; i < 12; i++ {
		updateConfigMaps(t, cs, shardedNS(i), 5)
	}
	testwait.For(t, 20*time.Second, "r-1 to reconcile every updated key", func() (bool, string) {
		got := map[string]string{}
		for _, iv := range j.snapshot()[mark:] {
			got[iv.key] = iv.replica
		}
		for i := 0; i < 12; i++ {
			for k := 0; k < 5; k++ {
				if key := fmt.Sprintf("%s/cm-%d", shardedNS(i), k); got[key] != "r-1" {
					return false, key + " not reconciled by r-1"
				}
			}
		}
		return true, ""
	})
	// The move listed r-0's objects, not everything again.
	moved := r1.mgr.GetCache().ModeReport()[0].ObjectsListed - listedBefore
	t.Logf("r-1 listed %d objects for the move of %d (total %d)", moved, len(k0), len(all))
	if moved < int64(len(k0)) || moved >= int64(len(all)) {
		t.Errorf("r-1 listed %d objects to take over %d (total %d): want the moved partitions' objects only", moved, len(k0), len(all))
	}
	if o := overlaps(j.snapshot()); len(o) > 0 {
		t.Fatalf("%d overlapping reconciles, first: %s", len(o), o[0])
	}
}

// Without the feature gate the server ignores the selector: the kind falls
// back to one full list and watch, filtered on the client, and says so on
// /readyz?verbose and in kshard_cache_mode; every key is still reconciled.
func TestShardedCacheFallsBackWithoutTheGate(t *testing.T) {
	ctx := context.Background()
	cfg, cs, all := shardedRing(t, false, 4, 3)
	j := &journal{}
	r0 := startReplica(t, cfg, "it", "r-0", j, time.Millisecond, shardedByNamespace)
	testwait.For(t, 30*time.Second, "the ring to form", func() (bool, string) { return ringSettled(ctx, cs, "it", "r-0") })
	testwait.For(t, 20*time.Second, "every key reconciled", func() (bool, string) {
		seen := map[string]bool{}
		for _, iv := range j.snapshot() {
			seen[iv.key] = true
		}
		return len(seen) >= len(all), fmt.Sprintf("%d of %d keys", len(seen), len(all))
	})
	modes := r0.mgr.GetCache().ModeReport()
	if len(modes) != 1 || modes[0].Mode != cache.ModeFallback || !strings.Contains(modes[0].Reason, "ShardInfo") {
		t.Fatalf("cache modes %+v, want ConfigMaps in fallback naming the missing ShardInfo", modes)
	}
	code, body := get("http://" + r0.mgr.ProbeAddr() + "/readyz?verbose")
	if code != 200 || !strings.Contains(body, "[i]cache: /v1, Kind=ConfigMap fallback") || !strings.Contains(body, "[+]joined ok") {
		t.Fatalf("/readyz?verbose = %d %q, want ready with the cache's fallback named", code, body)
	}
	if _, body := get("http://" + r0.mgr.MetricsAddr() + "/metrics"); !strings.Contains(body, `kshard_cache_mode{group="",kind="/v1, Kind=ConfigMap",kind_name="ConfigMap",mode="fallback",version="v1"} 1`) {
		t.Errorf("/metrics has no kshard_cache_mode line for the fallback")
	}
	if got := cachedKeys(t, r0); len(got) != len(all) {
		t.Fatalf("the only replica caches %d of %d objects", len(got), len(all))
	}
}

// A namespace in SharedNamespaces is cached by every replica: each reads
// the shared settings ConfigMap from its cache, whatever partitions it
// owns, and a change of it reaches every replica's mapped source, so every
// key is reconciled again, by its owner only, with the new settings. The
// same holds in the fallback (no feature gate: filtered on the client).
func TestSharedNamespaceReachesEveryReplica(t *testing.T) {
	for _, gate := range []bool{true, false} {
		t.Run(fmt.Sprintf("gate=%t", gate), func(t *testing.T) { testSharedNamespace(t, gate) })
	}
}

func testSharedNamespace(t *testing.T, gate bool) {
	ctx := context.Background()
	cfg, cs, _ := shardedRing(t, gate, 12, 3)
	const shared = "shared-it"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: shared}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	settings := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: shared}, Data: map[string]string{"v": "1"}}
	if _, err := cs.CoreV1().ConfigMaps(shared).Create(ctx, settings, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i := 0; i < 12; i++ {
		for k := 0; k < 3; k++ {
			keys = append(keys, fmt.Sprintf("%s/cm-%d", shardedNS(i), k))
		}
	}

	j := &journal{}
	var mu sync.Mutex
	seen := map[string]string{} // key → "replica v<settings>" of its latest reconcile
	var readErrs []error
	start := func(id string) *replica {
		mgr, err := New(cfg, Options{
			Ring: "it", LeaseNamespace: "it", Identity: id,
			PartitionBy: shard.SchemeNamespace, Partitions: 16, SharedNamespaces: []string{shared},
			LeaseDuration: 3 * time.Second, RenewPeriod: 300 * time.Millisecond, RenewDeadline: 2 * time.Second,
			DrainGracePeriod: time.Second, GracefulShutdownTimeout: 20 * time.Second,
			MetricsBindAddress: "127.0.0.1:0", HealthProbeBindAddress: "127.0.0.1:0", Logger: testLogger(t, id),
		})
		if err != nil {
			t.Fatal(err)
		}
		c := mgr.GetCache()
		notShared := func(o controller.Object) bool { return o.GetNamespace() != shared }
		isSettings := func(o controller.Object) bool { return o.GetNamespace() == shared && o.GetName() == "settings" }
		err = controller.NewControllerManagedBy(mgr).
			For(&corev1.ConfigMap{}, controller.NewPredicateFuncs(notShared)).
			Watches(&corev1.ConfigMap{}, controller.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ controller.Object) []controller.Request {
				var l corev1.ConfigMapList
				if err := c.List(ctx, &l, ""); err != nil {
					return nil
				}
				var reqs []controller.Request
				for _, cm := range l.Items {
					if cm.Namespace != shared {
						reqs = append(reqs, controller.Request{NamespacedName: types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}})
					}
				}
				return reqs
			}), controller.NewPredicateFuncs(isSettings)).
			WithOptions(controller.Options{MaxConcurrentReconciles: 2, SkipNameValidation: true}).
			Complete(controller.ReconcilerFunc(func(ctx context.Context, req controller.Request) (controller.Result, error) {
				begin := time.Now()
				var s corev1.ConfigMap
				err := c.Get(ctx, types.NamespacedName{Namespace: shared, Name: "settings"}, &s)
				mu.Lock()
				if err != nil {
					readErrs = append(readErrs, fmt.Errorf("%s reading the shared settings for %s: %w", id, req.Key(), err))
				} else {
					seen[req.Key()] = id + " v" + s.Data["v"]
				}
				mu.Unlock()
				j.add(interval{replica: id, key: req.Key(), start: begin, end: time.Now()})
				return controller.Result{}, err
			}))
		if err != nil {
			t.Fatal(err)
		}
		return runReplica(t, mgr)
	}
	r0, r1 := start("r-0"), start("r-1")
	testwait.For(t, 30*time.Second, "two replicas to split the ring", func() (bool, string) { return ringSettled(ctx, cs, "it", "r-0", "r-1") })
	// Which replica owns each key, by the ring both formed.
	ring, err := assign.New(shard.Config{Scheme: shard.SchemeNamespace, Partitions: 16}, []string{"r-0", "r-1"})
	if err != nil {
		t.Fatal(err)
	}
	rp, _ := ring.RangePartitioner()
	owner := func(key string) string {
		o, _ := ring.Owner(rp.Partition(key)) // the key's namespace decides
		return o
	}
	settled := func(v string) func() (bool, string) {
		return func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			for _, k := range keys {
				if want := owner(k) + " v" + v; seen[k] != want {
					return false, fmt.Sprintf("%s: latest reconcile %q, want %q (%d failed reads of the settings: %v)", k, seen[k], want, len(readErrs), errors.Join(readErrs[:min(1, len(readErrs))]...))
				}
			}
			return true, ""
		}
	}
	testwait.For(t, 30*time.Second, "every key reconciled by its owner with settings v1", settled("1"))
	// Both caches hold the shared namespace, though one replica owns its
	// partition.
	want := map[bool]string{true: cache.ModeSharded, false: cache.ModeFallback}[gate]
	for _, r := range []*replica{r0, r1} {
		var l corev1.ConfigMapList
		if err := r.mgr.GetCache().List(ctx, &l, shared); err != nil || len(l.Items) != 1 {
			t.Fatalf("%s listing the shared namespace: %d objects, %v", r.mgr.Identity(), len(l.Items), err)
		}
		if modes := r.mgr.GetCache().ModeReport(); len(modes) != 1 || modes[0].Mode != want {
			t.Fatalf("%s: cache modes %+v, want ConfigMaps %s", r.mgr.Identity(), modes, want)
		}
	}

	settings.Data["v"] = "2"
	if _, err := cs.CoreV1().ConfigMaps(shared).Update(ctx, settings, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "every key reconciled again by its owner with settings v2", settled("2"))
	mu.Lock()
	defer mu.Unlock()
	if len(readErrs) > 0 {
		t.Errorf("%d reads of the shared settings failed, first: %v", len(readErrs), readErrs[0])
	}
	if o := overlaps(j.snapshot()); len(o) > 0 {
		t.Fatalf("%d overlapping reconciles, first: %s", len(o), o[0])
	}
}

// With Balance, the replicas report their partitions' object counts and
// place partitions by them: with namespaces of uneven sizes, each replica
// caches exactly the namespaces the balanced ring of the true counts gives
// it (computed here from the objects created), which evens the objects out
// where the ring by number does not; every key is reconciled, and never by
// two replicas at once.
func TestBalancedRingEvensObjects(t *testing.T) {
	ctx := context.Background()
	cfg, cs, _ := shardedRing(t, true, 0, 0)
	const spaces = 12
	rp, err := shard.NewRangePartitioner(shard.SchemeNamespace, 16)
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int, 16)
	for i := range spaces {
		ns := shardedNS(i)
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		n := 2 + 3*i // 2 … 35 objects: uneven on purpose
		createConfigMaps(t, cs, ns, n)
		p, _ := rp.PartitionOfObject(ns, "") // where the namespace's objects go
		counts[p] += n
	}
	all := serverKeys(t, cs)
	ringCfg := shard.Config{Partitions: 16, Scheme: shard.SchemeNamespace, Balance: 0.05}
	weights := make(assign.Weights, 16)
	for p, n := range counts {
		weights[p] = assign.WeightBucket(n)
	}
	members := []string{"r-0", "r-1"}
	want, err := assign.NewWeighted(ringCfg, members, weights)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := assign.New(ringCfg, members)
	share := func(r *assign.Ring, id string) int {
		n := 0
		for p := range r.Partitions(id).All() {
			n += counts[p]
		}
		return n
	}
	t.Logf("objects of r-0 and r-1: %d and %d by number, %d and %d balanced (of %d)",
		share(plain, "r-0"), share(plain, "r-1"), share(want, "r-0"), share(want, "r-1"), len(all))
	if d := share(plain, "r-0") - share(plain, "r-1"); d*d <= (len(all)/10)*(len(all)/10) {
		t.Fatal("the ring by number is already within 10 %; the test shows nothing")
	}

	j := &journal{}
	balanced := func(o *Options) { shardedByNamespace(o); o.Balance = ringCfg.Balance }
	r0 := startReplica(t, cfg, "it", "r-0", j, time.Millisecond, balanced)
	r1 := startReplica(t, cfg, "it", "r-1", j, time.Millisecond, balanced)
	for _, r := range []*replica{r0, r1} {
		testwait.For(t, 30*time.Second, r.mgr.Identity()+" to know every partition's count", func() (bool, string) {
			_, body := get("http://" + r.mgr.MetricsAddr() + "/metrics")
			return strings.Contains(body, "kshard_ring_weighed_partitions 16"), "kshard_ring_weighed_partitions is not 16"
		})
	}
	testwait.For(t, 30*time.Second, "each replica to cache the balanced ring's share", func() (bool, string) {
		if ok, why := ringSettled(ctx, cs, "it", "r-0", "r-1"); !ok {
			return false, why
		}
		for _, r := range []*replica{r0, r1} {
			var expect []string
			for _, k := range all {
				if owner, _ := want.Owner(rp.Partition(k)); owner == r.mgr.Identity() {
					expect = append(expect, k)
				}
			}
			if got := cachedKeys(t, r); !slices.Equal(got, expect) {
				return false, fmt.Sprintf("%s caches %d objects, the balanced ring gives it %d", r.mgr.Identity(), len(got), len(expect))
			}
		}
		return true, ""
	})
	testwait.For(t, 20*time.Second, "every key reconciled", func() (bool, string) {
		seen := map[string]bool{}
		for _, iv := range j.snapshot() {
			seen[iv.key] = true
		}
		return len(seen) >= len(all), fmt.Sprintf("%d of %d keys", len(seen), len(all))
	})
	if o := overlaps(j.snapshot()); len(o) > 0 {
		t.Fatalf("%d overlapping reconciles, first: %s", len(o), o[0])
	}
}
