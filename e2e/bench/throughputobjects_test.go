package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/internal/assign"
	"github.com/kshard/kshard/shard"
)

// keysSpreadCap is the cap by the keys' spread of n bench objects in the
// bench namespace on a default ring of replicas r-0..r-(replicas-1), as
// phase 2 and phase 10's throughput rounds place them: n ÷ the busiest
// replica's objects.
func keysSpreadCap(t *testing.T, n, replicas int) float64 {
	t.Helper()
	var members []string
	for i := range replicas {
		members = append(members, "r-"+string(rune('0'+i)))
	}
	ring, err := assign.New(shard.Config{}, members)
	if err != nil {
		t.Fatal(err)
	}
	objects := map[string]int{}
	for i := range n {
		owner, ok := ring.OwnerOfKey(shard.KeyOf("kshard-bench", objectName(i)))
		if !ok {
			t.Fatalf("no owner of %s", objectName(i))
		}
		objects[owner]++
	}
	busiest := 0
	for _, c := range objects {
		busiest = max(busiest, c)
	}
	return float64(n) / float64(busiest)
}

// The throughput rounds run on enough objects that the keys' spread over 4
// replicas does not bind the 3.6× goal: 2,000 keys cap 4 replicas at 3.66×
// one leader however fast each is (546 on r-3), the default throughput
// objects at 3.8× or more.
func TestThroughputObjectsOutgrowTheKeysSpread(t *testing.T) {
	p := defaultParams(false)
	small, tp := keysSpreadCap(t, p.Objects, 4), keysSpreadCap(t, p.ThroughputObjects, 4)
	if tp < 3.8 {
		t.Errorf("%d throughput objects: cap %.2f by the keys' spread over 4 replicas, want at least 3.8", p.ThroughputObjects, tp)
	}
	if tp <= small {
		t.Errorf("%d throughput objects cap 4 replicas at %.2f, no higher than the %d other phases' objects (%.2f)", p.ThroughputObjects, tp, p.Objects, small)
	}
	if q := defaultParams(true); q.ThroughputObjects <= q.Objects {
		t.Errorf("quick run: %d throughput objects, want more than its %d objects, so that a smoke run grows and shrinks them", q.ThroughputObjects, q.Objects)
	}
}

// A deleted object no longer counts at its epoch or as labelled, whether
// the watch saw the delete or only a tombstone; its share of a past epoch
// stays.
func TestObserverForgetsDeletedObjects(t *testing.T) {
	o := newObserver()
	if err := o.watchLabels(labelsRing, shard.Config{}); err != nil {
		t.Fatal(err)
	}
	key, err := shard.PartitionLabelKey(labelsRing, shard.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := shard.NewPartitioner(shard.DefaultPartitions)
	object := func(name string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "kshard-bench", Name: name,
			Labels:      map[string]string{key: shard.PartitionLabelValue(p.Partition(shard.KeyOf("kshard-bench", name)))},
			Annotations: map[string]string{annObserved: "1/3", annReconciler: "r-0"}}}
	}
	for _, name := range []string{"obj-00000", "obj-00001", "obj-00002"} {
		o.observe(object(name))
	}
	o.forget(object("obj-00001"))
	o.forget(toolscache.DeletedFinalStateUnknown{Key: "kshard-bench/obj-00002", Obj: object("obj-00002")})
	o.forget(object("obj-00009")) // never seen: nothing to drop
	o.mu.Lock()
	at, objs := o.atEpoch(3), len(o.objs)
	gone, kept := o.holdsAny([]string{"kshard-bench/obj-00001", "kshard-bench/obj-00002"}), o.holdsAny([]string{"kshard-bench/obj-00000"})
	o.mu.Unlock()
	if at != 1 || objs != 1 {
		t.Errorf("after two deletes: %d objects at epoch 3 of %d held, want 1 of 1", at, objs)
	}
	if gone || !kept {
		t.Errorf("holdsAny: deleted %t (want false), kept %t (want true)", gone, kept)
	}
	if got := o.labelledCount(); got != 1 {
		t.Errorf("%d labelled after two deletes, want 1", got)
	}
	if s := o.shares(3, o.epochBy[3]["r-0"].first); len(s) != 1 || s[0].Objects != 3 {
		t.Errorf("epoch 3's shares %+v, want r-0's 3 objects kept", s)
	}
}

// shared gives a sample its replicas' shares (busiest first, as the
// observer returns them).
func shared(t throughputResult, objects ...int) throughputResult {
	for i, n := range objects {
		t.Shares = append(t.Shares, replicaShare{ID: "r-" + string(rune('0'+i)), Objects: n})
		t.Objects += n
	}
	return t
}

// The cap by the keys' spread is recorded per sample (or derived from the
// shares of a file from before it), summarised per latency-bound
// configuration of more than one active replica, and shown beside each
// ratio: in the throughput tables, the goals and phase 8's table.
func TestSpreadCapBesideEachRatio(t *testing.T) {
	r := &results{Params: defaultParams(false), Command: "go run ./e2e/bench", Env: env{Date: "2026-12-06"}}
	for round := 1; round <= 3; round++ {
		ks := shared(throughputResult{Round: round, System: nativeName, Replicas: 4, ActiveReplicas: 4, ObjectsPerSec: 210, LatencyMS: 60, MachineBusy: 0.5}, 1046, 1005, 987, 962)
		if round == 2 {
			ks.BusiestShare, ks.SpreadCap = 1046, 4000.0/1046 // recorded
		}
		r.Throughput.Samples = append(r.Throughput.Samples,
			shared(throughputResult{Round: round, System: baselineName, Replicas: 2, ActiveReplicas: 1, ObjectsPerSec: 55, LatencyMS: 60}, 4000), ks)
		r.WriteBound.Samples = append(r.WriteBound.Samples,
			shared(throughputResult{Round: round, System: baselineName, Replicas: 2, ActiveReplicas: 1, ObjectsPerSec: 290}, 4000),
			shared(throughputResult{Round: round, System: nativeName, Replicas: 4, ActiveReplicas: 4, ObjectsPerSec: 380}, 1046, 1005, 987, 962))
	}
	r.ShardedHandoff = []shardedHandoffResult{{Gate: true, CacheMode: "sharded", Objects: 2000, ThroughputObjects: 4000, Throughput: []throughputResult{
		shared(throughputResult{Round: 1, System: baselineName, Replicas: 2, ActiveReplicas: 1, ObjectsPerSec: 55, LatencyMS: 60, Epochs: epochsName(true)}, 4000),
		shared(throughputResult{Round: 1, System: nativeName, Replicas: 4, ActiveReplicas: 4, ObjectsPerSec: 215, LatencyMS: 60, Epochs: epochsName(true), MachineBusy: 0.5}, 1008, 1000, 1000, 992),
		shared(throughputResult{Round: 1, System: baselineName, Replicas: 2, ActiveReplicas: 1, ObjectsPerSec: 55, LatencyMS: 60, Epochs: epochsName(false)}, 4000),
		shared(throughputResult{Round: 1, System: nativeName, Replicas: 4, ActiveReplicas: 4, ObjectsPerSec: 200, LatencyMS: 60, Epochs: epochsName(false), MachineBusy: 0.5}, 1008, 1000, 1000, 992),
	}}}
	r.ShardedHandoff[0].ThroughputRatio4, r.ShardedHandoff[0].ThroughputRatio4PerNamespace = ptr(215.0/55), ptr(200.0/55)
	r.summarise()
	if c := r.Throughput.config(nativeName, 4); c == nil || c.SpreadCap == nil || f2(c.SpreadCap) != "3.82" {
		t.Errorf("kshard 4 replicas: spread_cap_median %v, want 3.82", c)
	}
	for _, c := range []*tpSummary{r.Throughput.config(baselineName, 0), r.WriteBound.config(nativeName, 4)} {
		if c != nil && c.SpreadCap != nil {
			t.Errorf("%s %d replicas: spread cap %.2f, want none (one active replica, or write-bound)", c.System, c.Replicas, *c.SpreadCap)
		}
	}
	if f2(r.ThroughputRatio4SpreadCap) != "3.82" || f2(r.Sharded.ThroughputRatio4SpreadCap) != "3.97" {
		t.Errorf("gates' caps %s and %s, want 3.82 and 3.97", f2(r.ThroughputRatio4SpreadCap), f2(r.Sharded.ThroughputRatio4SpreadCap))
	}
	md := r.markdown()
	for _, want := range []string{
		"| kshard | 4 (4) | 3 | 210 (210–210) | 0.00 | 3.82 (cap 3.82 by the keys' spread) |",
		"| 3.82× (60 ms, machine 50 % busy, cap 3.82 by the keys' spread) | **met** |",
		"| 3.91× (3.64×); cap 3.97 |",
		"Objects W: 2000 ConfigMaps (throughput rounds: 4000; resources phase: 10000)",
		"`PartitionBy: namespace`, 2000 objects (the throughput rounds on 4000) spread over",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("RESULTS.md lacks %q", want)
		}
	}
	_, writeBound, _ := strings.Cut(md, "Write-bound (no simulated latency)")
	writeBound, _, _ = strings.Cut(writeBound, "<details>")
	if strings.Contains(md, "| 1.00 (cap") || strings.Contains(writeBound, "(cap ") {
		t.Errorf("RESULTS.md shows a cap beside the leader's or a write-bound ratio:\n%s", md)
	}
}

// A file from before the caps were recorded renders them from its shares
// (-report-only), and one whose samples hold no shares renders none.
func TestOlderFilesRenderTheCapFromTheirShares(t *testing.T) {
	for _, withShares := range []bool{true, false} {
		r := &results{Params: defaultParams(false), Command: "go run ./e2e/bench", Env: env{Date: "2026-11-29"}}
		ks := throughputResult{Round: 1, System: nativeName, Replicas: 4, ActiveReplicas: 4, ObjectsPerSec: 185, LatencyMS: 60, MachineBusy: 0.9, Objects: 2000}
		if withShares {
			ks = shared(throughputResult{Round: 1, System: nativeName, Replicas: 4, ActiveReplicas: 4, ObjectsPerSec: 185, LatencyMS: 60, MachineBusy: 0.9}, 546, 510, 477, 467)
		}
		r.Throughput.Samples = []throughputResult{{Round: 1, System: baselineName, Replicas: 2, ActiveReplicas: 1, ObjectsPerSec: 55, LatencyMS: 60, Objects: 2000}, ks}
		r.summarise()
		// As a file written before the cap: its gate has none.
		r.ThroughputRatio4SpreadCap = nil
		for i := range r.Throughput.Configs {
			r.Throughput.Configs[i].SpreadCap = nil
		}
		r.ParamsView = paramsView(r.Params)
		dir := t.TempDir()
		if err := r.save(dir); err != nil {
			t.Fatal(err)
		}
		if err := rewriteReport(dir, false); err != nil {
			t.Fatal(err)
		}
		md, err := os.ReadFile(filepath.Join(dir, "RESULTS.md"))
		if err != nil {
			t.Fatal(err)
		}
		has := strings.Contains(string(md), "3.36 (cap 3.66 by the keys' spread)") && strings.Contains(string(md), "(60 ms, machine 90 % busy, cap 3.66 by the keys' spread)")
		if has != withShares {
			t.Errorf("shares recorded %t: RESULTS.md shows the cap %t\n%s", withShares, has, md)
		}
		if !withShares && strings.Contains(string(md), "(cap ") {
			t.Errorf("no shares recorded: RESULTS.md shows a cap anyway")
		}
	}
}
