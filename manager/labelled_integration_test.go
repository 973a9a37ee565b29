package manager

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kshard/kshard/shard"
	"github.com/kshard/kshard/shard/cache"
)

// labelledByKey is the gate-free sharded cache under the default key
// partitioning, as a stock cluster (no feature gate) runs it.
func labelledByKey(o *Options) {
	o.CacheMode = CacheLabels
	o.Partitions = 16
	o.WatchNamespace = ""
}

// labelKeyOf is the partition label of the test ring.
func labelKeyOf(t *testing.T) string {
	t.Helper()
	key, err := shard.PartitionLabelKey("it", shard.Config{Partitions: 16})
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// fixtureKeys returns the keys of the ConfigMaps the test created (those
// in the n*-sharded namespaces), sorted.
func fixtureKeys(keys []string) []string {
	var out []string
	for _, k := range keys {
		if strings.HasSuffix(strings.SplitN(k, "/", 2)[0], "-sharded") {
			out = append(out, k)
		}
	}
	return out
}

// allLabelled reports whether every ConfigMap on the server carries the
// ring's label naming its key's partition.
func allLabelled(t *testing.T, cs kubernetes.Interface, key string, p shard.Partitioner) (bool, string) {
	l, err := cs.CoreV1().ConfigMaps("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	for _, cm := range l.Items {
		if want := shard.PartitionLabelValue(p.Partition(shard.KeyOf(cm.Namespace, cm.Name))); cm.Labels[key] != want {
			return false, fmt.Sprintf("%s/%s has %s=%q, want %q", cm.Namespace, cm.Name, key, cm.Labels[key], want)
		}
	}
	return true, ""
}

// labelPatches sums the label patches of every labelled kind of r's cache.
func labelPatches(r *replica) int64 {
	var n int64
	for _, m := range r.mgr.GetCache().ModeReport() {
		n += m.LabelPatches
	}
	return n
}

// With CacheMode labels on an API server without the sharded list/watch
// gate, every object is labelled once with its key's partition, each
// replica then caches only the objects of its partitions (disjoint caches
// whose union is everything), and a leave moves partitions without a
// single write: the survivor lists the moved labels and reconciles every
// key, never two replicas at once.
func TestLabelledCacheHoldsOnlyItsPartitions(t *testing.T) {
	ctx := context.Background()
	cfg, cs, all := shardedRing(t, false, 8, 8)
	j := &journal{}
	r0 := startReplica(t, cfg, "it", "r-0", j, 10*time.Millisecond, labelledByKey)
	r1 := startReplica(t, cfg, "it", "r-1", j, 10*time.Millisecond, labelledByKey)
	eventually(t, 30*time.Second, "two replicas to split the ring", func() (bool, string) { return ringSettled(ctx, cs, "it", "r-0", "r-1") })
	eventually(t, 30*time.Second, "every key reconciled", func() (bool, string) {
		seen := map[string]bool{}
		for _, iv := range j.snapshot() {
			seen[iv.key] = true
		}
		return len(seen) >= len(all), fmt.Sprintf("%d of %d keys", len(seen), len(all))
	})
	key, p := labelKeyOf(t), shard.NewPartitioner(16)
	eventually(t, 30*time.Second, "every ConfigMap labelled with its partition", func() (bool, string) { return allLabelled(t, cs, key, p) })
	var k0, k1 []string
	eventually(t, 10*time.Second, "the caches to hold disjoint halves of every object", func() (bool, string) {
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
	patches := labelPatches(r0) + labelPatches(r1)
	if patches > int64(len(all)) {
		t.Errorf("the replicas sent %d label patches for %d objects: more than one write per object", patches, len(all))
	}
	for _, r := range []*replica{r0, r1} {
		modes := r.mgr.GetCache().ModeReport()
		if len(modes) != 1 || modes[0].Mode != cache.ModeLabels {
			t.Fatalf("%s: cache modes %+v, want ConfigMaps labelled", r.mgr.Identity(), modes)
		}
		if _, body := get("http://" + r.mgr.MetricsAddr() + "/metrics"); !strings.Contains(body, `kshard_cache_mode{group="",kind="/v1, Kind=ConfigMap",kind_name="ConfigMap",mode="labels",version="v1"} 1`) {
			t.Errorf("%s: /metrics has no kshard_cache_mode line for labelled ConfigMaps", r.mgr.Identity())
		}
	}

	mark := len(j.snapshot())
	r0.stop(t)
	patches = labelPatches(r0) + labelPatches(r1)
	eventually(t, 15*time.Second, "r-1 alone to own the ring", func() (bool, string) { return ringSettled(ctx, cs, "it", "r-1") })
	eventually(t, 10*time.Second, "r-1 to cache every object", func() (bool, string) {
		got := cachedKeys(t, r1)
		return len(got) == len(all), fmt.Sprintf("%d of %d", len(got), len(all))
	})
	for i := 0; i < 8; i++ {
		updateConfigMaps(t, cs, shardedNS(i), 8)
	}
	eventually(t, 20*time.Second, "r-1 to reconcile every updated key", func() (bool, string) {
		got := map[string]string{}
		for _, iv := range j.snapshot()[mark:] {
			got[iv.key] = iv.replica
		}
		for _, k := range fixtureKeys(all) {
			if got[k] != "r-1" {
				return false, k + " not reconciled by r-1"
			}
		}
		return true, ""
	})
	if n := labelPatches(r0) + labelPatches(r1) - patches; n != 0 {
		t.Errorf("the leave and the updates wrote %d labels, want none", n)
	}
	if o := overlaps(j.snapshot()); len(o) > 0 {
		t.Fatalf("%d overlapping reconciles, first: %s", len(o), o[0])
	}
}

// Replicas of one ring may run different cache modes: a ring moves from
// full caches to labelled ones by a rolling update, with a reconciler of
// every key at every moment and never two at once.
func TestCacheModesMixInOneRing(t *testing.T) {
	ctx := context.Background()
	cfg, cs, all := shardedRing(t, false, 6, 5)
	j := &journal{}
	full := func(o *Options) { o.Partitions = 16; o.WatchNamespace = "" }
	r0 := startReplica(t, cfg, "it", "r-0", j, 5*time.Millisecond, full)
	r1 := startReplica(t, cfg, "it", "r-1", j, 5*time.Millisecond, full)
	eventually(t, 30*time.Second, "the full-cache ring to form", func() (bool, string) { return ringSettled(ctx, cs, "it", "r-0", "r-1") })
	// Roll: each full replica is replaced by a labelled one.
	r0.stop(t)
	r0 = startReplica(t, cfg, "it", "r-0", j, 5*time.Millisecond, labelledByKey)
	eventually(t, 30*time.Second, "the mixed ring to form", func() (bool, string) { return ringSettled(ctx, cs, "it", "r-0", "r-1") })
	r1.stop(t)
	r1 = startReplica(t, cfg, "it", "r-1", j, 5*time.Millisecond, labelledByKey)
	eventually(t, 30*time.Second, "the labelled ring to form", func() (bool, string) { return ringSettled(ctx, cs, "it", "r-0", "r-1") })
	key, p := labelKeyOf(t), shard.NewPartitioner(16)
	eventually(t, 30*time.Second, "every ConfigMap labelled", func() (bool, string) { return allLabelled(t, cs, key, p) })
	mark := len(j.snapshot())
	for i := 0; i < 6; i++ {
		updateConfigMaps(t, cs, shardedNS(i), 5)
	}
	eventually(t, 20*time.Second, "every updated key reconciled", func() (bool, string) {
		seen := map[string]bool{}
		for _, iv := range j.snapshot()[mark:] {
			seen[iv.key] = true
		}
		for _, k := range fixtureKeys(all) {
			if !seen[k] {
				return false, k + " not reconciled"
			}
		}
		return true, ""
	})
	if o := overlaps(j.snapshot()); len(o) > 0 {
		t.Fatalf("%d overlapping reconciles, first: %s", len(o), o[0])
	}
}
