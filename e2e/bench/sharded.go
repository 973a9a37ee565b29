package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kshard/kshard/manager/kshardtest/controlplane"
	"github.com/kshard/kshard/shard/cache"
)

// Phase 7 measures the sharded cache (manager.Options.PartitionBy
// namespace): per-replica memory and the fleet's CPU against the
// leader-elected controller-runtime operator, at object counts where the
// cache dominates memory. It runs on control planes of its own, so that
// the objects of the other phases do not sit in the all-namespace caches:
// one with the ShardedListAndWatch feature gate (kshard sharded beside
// controller-runtime) and, in full runs, one without it (kshard in the
// fallback: every object listed and cached, filtered on the client). On
// each, before the ConfigMaps, both systems also reconcile the BenchObject
// custom resource at p.ShardedCustomResources objects, and the report
// names the cache mode kshard chose for it beside the ConfigMaps'.

// shardedResult is one system's run of phase 7 at one object count, or of
// phase 10 in one round.
type shardedResult struct {
	System string `json:"system"`
	// Kind is the objects' kind: ConfigMap (files from before custom
	// resources were measured have none) or BenchObject.
	Kind string `json:"kind,omitempty"`
	// CacheMode: kshard's kshard_cache_mode for Kind (sharded or fallback in
	// phase 7, labels in phase 10; several joined by "+" when the replicas
	// disagree); controller-runtime: full.
	CacheMode  string `json:"cache_mode"`
	Gate       bool   `json:"feature_gate"`
	Round      int    `json:"round,omitempty"` // phase 10
	Replicas   int    `json:"replicas"`
	Objects    int    `json:"objects"`
	Namespaces int    `json:"namespaces"`
	// StartupSeconds is start → formed with every object's initial
	// reconcile done; PassSeconds is one update of every object until
	// every reconcile is done and the fleet is idle.
	StartupSeconds float64            `json:"startup_seconds"`
	PassSeconds    float64            `json:"pass_seconds"`
	CPUSeconds     map[string]float64 `json:"cpu_seconds"`
	PeakRSSMiB     map[string]float64 `json:"peak_rss_mib"`
	MaxPeakRSSMiB  float64            `json:"max_peak_rss_mib"`
	MinPeakRSSMiB  float64            `json:"min_peak_rss_mib"`
	FleetCPU       float64            `json:"fleet_cpu_seconds"`
	// SteadyRSSMiB is each replica's RSS once the fleet is idle after the
	// pass; LiveHeapMiB its Go heap after a forced collection, and
	// RSSAfterGCMiB its RSS once that collection's pages went back to the
	// kernel: figures that move less with the collector's timing than
	// the peak (results.json from before have none).
	SteadyRSSMiB     map[string]float64 `json:"steady_rss_mib,omitempty"`
	LiveHeapMiB      map[string]float64 `json:"live_heap_mib,omitempty"`
	RSSAfterGCMiB    map[string]float64 `json:"rss_after_gc_mib,omitempty"`
	MaxSteadyRSSMiB  float64            `json:"max_steady_rss_mib,omitempty"`
	MaxLiveHeapMiB   float64            `json:"max_live_heap_mib,omitempty"`
	MaxRSSAfterGCMiB float64            `json:"max_rss_after_gc_mib,omitempty"`
	// ObjectsListed sums kshard_cache_listed_objects_total over the fleet.
	ObjectsListed float64 `json:"objects_listed,omitempty"`
	// CachedObjects is each kshard replica's kshard_cache_objects for Kind
	// after the pass: the objects it holds.
	CachedObjects map[string]float64 `json:"cached_objects,omitempty"`
	// LabelPatches and ConfirmReads sum the fleet's
	// kshard_cache_label_patches_total and kshard_cache_confirm_reads_total
	// (CacheMode labels) from start to the end of the pass.
	LabelPatches float64 `json:"label_patches,omitempty"`
	ConfirmReads float64 `json:"confirm_reads,omitempty"`
	// RolloutMaxPeakRSSMiB (kshard, gate on): after the pass the replicas
	// are restarted one by one, as a rollout does; the largest peak RSS of
	// the new processes. While one replica restarts the others hold its
	// partitions too, so every new process but the last peaks at its
	// share plus its part of a peer's (1.5× its share with 3 replicas):
	// what a memory limit must allow.
	RolloutMaxPeakRSSMiB float64 `json:"rollout_max_peak_rss_mib,omitempty"`
	// RolloutLabelPatches and RolloutObjectsListed: what the fleet's
	// processes labelled and listed during the rolling restart, in which
	// every object moves twice (away from its replica and back).
	RolloutLabelPatches  float64 `json:"rollout_label_patches,omitempty"`
	RolloutObjectsListed float64 `json:"rollout_objects_listed,omitempty"`
	// RolloutKeptPlaces: the replicas ran with --keep-place-on-leave
	// (manager.Options.KeepPlaceOnLeave, phase 10): a restarting
	// replica's partitions wait for its next process instead of moving to
	// its peers and back, so the peers' caches do not grow and each
	// object is listed once, by its replica's next process.
	RolloutKeptPlaces bool `json:"rollout_kept_places,omitempty"`
}

// kindOf is r's kind; files from before custom resources were measured
// name none: ConfigMap.
func (r shardedResult) kindOf() string { return cmp.Or(r.Kind, configMaps.Name) }

// shardedSummary is the headline of phases 7 and 8 on one control plane
// (with the feature gate: "sharded"; without: "sharded_fallback").
type shardedSummary struct {
	// Objects is phase 7's largest object count, where the ratios are taken.
	Objects int `json:"objects,omitempty"`
	// RSSRatio: the largest kshard replica's peak RSS ÷ the
	// controller-runtime leader's (goal ≤ 0.40, aim 0.35).
	RSSRatio *float64 `json:"rss_ratio"`
	// RSSRatioRollout is RSSRatio for the kshard processes started by a
	// rolling restart (shardedResult.RolloutMaxPeakRSSMiB).
	RSSRatioRollout *float64 `json:"rss_ratio_rolling_restart,omitempty"`
	// RSSRatioSmall is RSSRatio at the smallest count (10,000 in full runs).
	RSSRatioSmall *float64 `json:"rss_ratio_smallest"`
	// IdleFloorRatio: the controller-runtime standby's peak RSS (caches
	// nothing) ÷ its leader's: the floor no replica can go below.
	IdleFloorRatio *float64 `json:"idle_floor_ratio,omitempty"`
	// LiveHeapRatio and SteadyRSSRatio are RSSRatio's steadier companions
	// (absent from older files): the largest live heap after a forced
	// collection, and the largest RSS once the fleet is idle after the
	// pass, each ÷ the leader's.
	LiveHeapRatio  *float64 `json:"live_heap_ratio,omitempty"`
	SteadyRSSRatio *float64 `json:"steady_rss_ratio,omitempty"`
	// CustomResources is how many BenchObjects phase 7 ran over,
	// CustomResourceMode the cache mode kshard chose for them, and
	// RSSRatioCustomResources RSSRatio over them.
	CustomResources         int      `json:"custom_resources,omitempty"`
	CustomResourceMode      string   `json:"custom_resource_mode,omitempty"`
	RSSRatioCustomResources *float64 `json:"rss_ratio_custom_resources,omitempty"`
	// FleetCPURatio: CPU seconds of the whole kshard fleet ÷ the
	// controller-runtime fleet's, same work (goal ≤ 1.2).
	FleetCPURatio *float64 `json:"fleet_cpu_ratio"`
	// Phase 8: kshard's 4-replica latency-bound throughput ÷ the
	// controller-runtime leader's with phase 2's workload, one epoch
	// ConfigMap for every object (goal ≥ 3.6), graceful handoff p99 in a
	// rolling restart, crash failover, and objects listed per moved object
	// in the rolling restart (shardedMoveSummary).
	ThroughputRatio4 *float64 `json:"throughput_ratio_4"`
	ratioGate
	// ThroughputRatio4PerNamespace: the same with an epoch ConfigMap per
	// object namespace (a new epoch is a burst of writes, not one).
	ThroughputRatio4PerNamespace *float64 `json:"throughput_ratio_4_epoch_per_namespace,omitempty"`
	HandoffP99Seconds            *float64 `json:"handoff_p99_seconds"`
	FailoverSeconds              *float64 `json:"failover_seconds"`
	ObjectsListedPerMove         *float64 `json:"objects_listed_per_move"`
}

// shardedNamespace names the k-th object namespace of phase 7. The number
// comes first: names that differ only at the end hash into one or two
// partitions (shard/README.md, "Balance").
// shardedArgs are kshard's flags for the sharded cache (phases 7 and 8).
func (b *bench) shardedArgs() []string {
	return []string{"--partition-by=namespace", "--balance=" + strconv.FormatFloat(b.p.ShardedBalance, 'f', -1, 64)}
}

func shardedNamespace(k int) string { return fmt.Sprintf("s%03d-kshard-bench", k) }

// shardedPhase runs phase 7 for every object count in p.ShardedObjects.
func (b *bench) shardedPhase(ctx context.Context, kshard, baseline *system) ([]shardedResult, error) {
	var out []shardedResult
	gates := []bool{true}
	if b.p.ShardedFallback {
		gates = append(gates, false)
	}
	for _, gate := range gates {
		sb, stop, err := b.shardedBench(ctx, gate, b.p.ShardedNamespaces)
		if err != nil {
			return out, err
		}
		systems := []*system{kshard}
		if gate {
			systems = []*system{baseline, kshard} // controller-runtime ignores the gate: measured once
		}
		// The custom resources first: their runs would otherwise cache the
		// ConfigMaps too (both operators watch ConfigMaps for the epoch).
		if n := b.p.ShardedCustomResources; n > 0 {
			rs, err := sb.shardedCustomResources(ctx, systems, n, gate)
			out = append(out, rs...)
			if err != nil {
				stop()
				return out, err
			}
		}
		created := 0
		for _, n := range b.p.ShardedObjects {
			progress("phase 7: %d objects over %d namespaces (feature gate %t)", n, b.p.ShardedNamespaces, gate)
			if err := sb.createSpread(ctx, created, n); err != nil {
				stop()
				return out, err
			}
			created = n
			for _, sys := range systems {
				r, err := sb.shardedRun(ctx, sys, n, gate)
				out = append(out, r)
				if err != nil {
					stop()
					return out, fmt.Errorf("%s at %d objects (gate %t): %w", sys.name, n, gate, err)
				}
				if want := map[bool]string{true: cache.ModeSharded, false: cache.ModeFallback}[gate]; sys.kshard && r.CacheMode != want {
					stop()
					return out, fmt.Errorf("kshard cached ConfigMaps in mode %s with the feature gate %t, want %s", r.CacheMode, gate, want)
				}
			}
		}
		stop()
	}
	return out, nil
}

// shardedRun is one system's phase 7 run at n objects: kshard on the
// sharded cache (phase 7's fleet, PartitionBy namespace) and, with the
// gate, through a rolling restart; controller-runtime's usual pair.
func (b *bench) shardedRun(ctx context.Context, sys *system, n int, gate bool) (shardedResult, error) {
	spec := resourceSpec{scenario: fmt.Sprintf("shard-%s-%d-%t", strings.ToLower(b.objs.kind.Name), n, gate), replicas: b.p.BaselineReplicas}
	if b.objs.kind != configMaps {
		spec.args = []string{"--kind=" + b.objs.kind.Name}
	}
	if sys.kshard {
		spec.replicas = b.p.ShardedReplicas
		spec.args = append(spec.args, b.shardedArgs()...)
		spec.rollout = gate && b.objs.kind == configMaps
	}
	r, err := b.measureResources(ctx, sys, n, spec)
	r.Gate, r.Namespaces = gate, b.p.ShardedNamespaces
	if err == nil {
		r.logProgress()
	}
	return r, err
}

// logProgress reports a resources run on the progress log.
func (r shardedResult) logProgress() {
	progress("  %s, %s (%s): peak RSS max %.0f MiB min %.0f MiB, steady %.0f MiB, live heap %.0f MiB; fleet CPU %.1fs; %.0f objects listed, %.0f label patches",
		r.System, r.kindOf(), r.CacheMode, r.MaxPeakRSSMiB, r.MinPeakRSSMiB, r.MaxSteadyRSSMiB, r.MaxLiveHeapMiB, r.FleetCPU, r.ObjectsListed, r.LabelPatches)
	if r.RolloutMaxPeakRSSMiB > 0 {
		progress("  %s after a rolling restart: peak RSS max %.0f MiB, %.0f label patches, %.0f objects listed", r.System, r.RolloutMaxPeakRSSMiB, r.RolloutLabelPatches, r.RolloutObjectsListed)
	}
}

// shardedCustomResources runs phase 7's systems over n BenchObjects on sb's
// control plane. kshard's cache mode for them is recorded, not required:
// an API server that filters custom resources by shard selector but does
// not say so leaves them in the fallback (a warning), until kshard's probe
// proves the filtering otherwise.
func (sb *bench) shardedCustomResources(ctx context.Context, systems []*system, n int, gate bool) ([]shardedResult, error) {
	cb, err := sb.withKind(ctx, benchObjects)
	if err != nil {
		return nil, err
	}
	progress("phase 7: %d custom resources (BenchObject) over %d namespaces (feature gate %t)", n, cb.spread, gate)
	if err := cb.createSpread(ctx, 0, n); err != nil {
		return nil, err
	}
	var out []shardedResult
	for _, sys := range systems {
		r, err := cb.shardedRun(ctx, sys, n, gate)
		out = append(out, r)
		if err != nil {
			return out, fmt.Errorf("%s over %d custom resources (gate %t): %w", sys.name, n, gate, err)
		}
		if gate && sys.kshard && r.CacheMode != cache.ModeSharded {
			sb.warn("phase 7: with the feature gate, kshard cached the BenchObject custom resource in mode %s, not %s", r.CacheMode, cache.ModeSharded)
		}
	}
	return out, nil
}

// shardedBench starts a control plane of its own for phases 7-9, with
// namespaces spread objects over, and returns a bench on it (sharing the
// operators, logs and parameters) and its stop.
func (b *bench) shardedBench(ctx context.Context, gate bool, namespaces int) (*bench, func(), error) {
	cp, err := controlplane.Start(ctx, controlplane.Options{ShardedListAndWatch: gate})
	if err != nil {
		return nil, nil, fmt.Errorf("phase 7: starting a control plane (feature gate %t): %w", gate, err)
	}
	stop := func() { _ = cp.Stop() }
	client, err := kubernetes.NewForConfig(cp.Config())
	if err != nil {
		stop()
		return nil, nil, err
	}
	sb := &bench{p: b.p, cp: cp, client: client, objs: objectClient{kind: configMaps, typed: client}, dir: b.dir, ns: b.ns, spread: namespaces, parent: b}
	for k := -1; k < namespaces; k++ {
		ns := b.ns
		if k >= 0 {
			ns = shardedNamespace(k)
		}
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			stop()
			return nil, nil, err
		}
	}
	return sb, stop, nil
}

// createSpread creates objects from up to n round robin over the phase's
// namespaces, each already marked reconciled at generation 1 and epoch 0
// (phase 7 has no epoch ConfigMaps).
func (b *bench) createSpread(ctx context.Context, from, n int) error {
	for len(b.gens) < n {
		b.gens = append(b.gens, 1)
	}
	return parallel(ctx, 32, n-from, func(ctx context.Context, k int) error {
		i := from + k
		// No epoch ConfigMap in these namespaces: the operators read epoch 0.
		return b.objs.create(ctx, b.objectNamespace(i), objectName(i), map[string]string{annObserved: "1/0"},
			map[string]string{genKey: "1", "payload": "benchmark object " + strconv.Itoa(i)})
	})
}

// resourceSpec says how measureResources runs a system.
type resourceSpec struct {
	scenario string
	replicas int
	// args are the replicas' flags beyond --all-namespaces.
	args []string
	// rollout: after the pass, restart every replica one by one, as a
	// rolling update does, and measure the new processes (kshard).
	rollout bool
}

// measureResources starts sys with spec over the n objects of b (which
// every replica caches: --all-namespaces), waits until formed and idle,
// updates every object once, waits until every update is reconciled and
// the fleet is idle, and reads the replicas' CPU and peak and current RSS,
// then their live heap after a forced collection; kshard's also its cache
// mode for b's kind and what its caches listed and labelled, and with
// spec.rollout the peak RSS and labelling of a rolling restart.
func (b *bench) measureResources(ctx context.Context, sys *system, n int, spec resourceSpec) (shardedResult, error) {
	res := shardedResult{System: sys.name, Kind: b.objs.kind.Name, Objects: n, CacheMode: "full", Replicas: spec.replicas}
	b.fleetArgs = append([]string{"--all-namespaces"}, spec.args...)
	defer func() { b.fleetArgs = nil }()
	start := time.Now()
	f, err := b.startFleet(sys, spec.scenario, res.Replicas, fleetSpec{})
	if err != nil {
		return res, err
	}
	defer f.kill()
	if err := f.waitReady(ctx, readiness{minReconciles: float64(n), leaderWarm: float64(n), quiet: true}, b.p.passTimeout(n)); err != nil {
		return res, err
	}
	res.StartupSeconds = time.Since(start).Seconds()
	before, err := f.reconciles(ctx)
	if err != nil {
		return res, err
	}
	sent := time.Now()
	if err := parallel(ctx, 32, n, func(ctx context.Context, i int) error { return b.bumpSpread(ctx, i) }); err != nil {
		return res, err
	}
	if err := f.waitReady(ctx, readiness{minReconciles: before + float64(n), quiet: true}, b.p.passTimeout(n)); err != nil {
		return res, err
	}
	res.PassSeconds = time.Since(sent).Seconds()
	if err := res.readMemory(ctx, f); err != nil {
		return res, err
	}
	if sys.kshard {
		modes := map[string]bool{}
		res.CachedObjects = map[string]float64{}
		for _, r := range f.live() {
			m, err := scrape(ctx, r.metricsAddr)
			if err != nil {
				return res, err
			}
			res.ObjectsListed += m.sum("kshard_cache_listed_objects_total", nil)
			modes[kindMode(m, b.objs.kind)] = true
			res.CachedObjects[r.id] = m.sum("kshard_cache_objects", map[string]string{"kind": b.objs.kind.metricLabel()})
		}
		res.CacheMode = strings.Join(slices.Sorted(maps.Keys(modes)), "+")
		c, err := f.counters(ctx)
		if err != nil {
			return res, err
		}
		res.LabelPatches, res.ConfirmReads = c["kshard_cache_label_patches_total"], c["kshard_cache_confirm_reads_total"]
	}
	if spec.rollout {
		before, err := f.counters(ctx)
		if err != nil {
			return res, err
		}
		for _, id := range slices.Clone(f.ids) {
			if _, err := f.restart(ctx, id); err != nil {
				return res, fmt.Errorf("rolling restart, %s: %w", id, err)
			}
		}
		restarted, err := f.stats()
		if err != nil {
			return res, err
		}
		for _, s := range restarted {
			res.RolloutMaxPeakRSSMiB = max(res.RolloutMaxPeakRSSMiB, mib(s.PeakRSS))
		}
		after, err := f.counters(ctx)
		if err != nil {
			return res, err
		}
		res.RolloutLabelPatches = after["kshard_cache_label_patches_total"] - before["kshard_cache_label_patches_total"]
		res.RolloutObjectsListed = after["kshard_cache_listed_objects_total"] - before["kshard_cache_listed_objects_total"]
	}
	if err := f.stopAll(); err != nil {
		b.warn("%s: %v", f.name, err)
	}
	return res, nil
}

// readMemory fills res's CPU and memory figures from f's live replicas:
// CPU time, peak RSS and the RSS now (the steady state, read after the
// fleet went idle), then each replica's live heap after a forced
// collection and its RSS once the freed pages went back.
func (res *shardedResult) readMemory(ctx context.Context, f *fleet) error {
	stats, err := f.stats()
	if err != nil {
		return err
	}
	res.CPUSeconds, res.PeakRSSMiB, res.SteadyRSSMiB = map[string]float64{}, map[string]float64{}, map[string]float64{}
	res.LiveHeapMiB, res.RSSAfterGCMiB = map[string]float64{}, map[string]float64{}
	res.MinPeakRSSMiB = -1
	for id, s := range stats {
		res.CPUSeconds[id] = s.CPUSeconds
		res.FleetCPU += s.CPUSeconds
		rss := mib(s.PeakRSS)
		res.PeakRSSMiB[id] = rss
		res.MaxPeakRSSMiB = max(res.MaxPeakRSSMiB, rss)
		if res.MinPeakRSSMiB < 0 || rss < res.MinPeakRSSMiB {
			res.MinPeakRSSMiB = rss
		}
		res.SteadyRSSMiB[id] = mib(s.RSS)
		res.MaxSteadyRSSMiB = max(res.MaxSteadyRSSMiB, res.SteadyRSSMiB[id])
	}
	// After the CPU reading: the collections cost CPU the workload did not.
	for _, r := range f.live() {
		h, err := r.liveHeap(ctx)
		if err != nil {
			return err
		}
		res.LiveHeapMiB[r.id], res.RSSAfterGCMiB[r.id] = mib(h.LiveHeap), mib(h.RSS)
		res.MaxLiveHeapMiB = max(res.MaxLiveHeapMiB, res.LiveHeapMiB[r.id])
		res.MaxRSSAfterGCMiB = max(res.MaxRSSAfterGCMiB, res.RSSAfterGCMiB[r.id])
	}
	return nil
}

func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }

// kindMode is the cache mode a kshard replica's kshard_cache_mode reports
// for kind ("" when the kind is not cached yet).
func kindMode(m metrics, kind objectKind) string {
	for _, s := range m["kshard_cache_mode"].GetMetric() {
		var k, mode string
		for _, l := range s.GetLabel() {
			switch l.GetName() {
			case "kind":
				k = l.GetValue()
			case "mode":
				mode = l.GetValue()
			}
		}
		if k == kind.metricLabel() && s.GetGauge().GetValue() == 1 {
			return mode
		}
	}
	return ""
}

// bumpSpread writes a new generation into object i of phase 7.
func (b *bench) bumpSpread(ctx context.Context, i int) error {
	b.gens[i]++
	patch, _ := json.Marshal(map[string]any{"data": map[string]string{genKey: strconv.Itoa(b.gens[i])}})
	return b.objs.patch(ctx, b.objectNamespace(i), objectName(i), patch)
}

// reconciles sums the live replicas' reconciles so far.
func (f *fleet) reconciles(ctx context.Context) (float64, error) {
	var total float64
	for _, r := range f.live() {
		m, err := scrape(ctx, r.metricsAddr)
		if err != nil {
			return 0, err
		}
		total += m.sum("controller_runtime_reconcile_total", nil)
	}
	return total, nil
}

// summariseSharded fills the headlines of phases 7 and 8 from their runs:
// with the gate and without it (the fallback; its ratios divide by the
// controller-runtime runs of the gate-on control plane).
func summariseSharded(runs []shardedResult, moves []shardedHandoffResult) (sharded, fallback *shardedSummary) {
	findKind := func(kind, system string, gate bool, n int) *shardedResult {
		for i := range runs {
			if r := &runs[i]; r.kindOf() == kind && r.System == system && r.Gate == gate && r.Objects == n {
				return r
			}
		}
		return nil
	}
	find := func(system string, gate bool, n int) *shardedResult {
		return findKind(configMaps.Name, system, gate, n)
	}
	lo, hi, crs := 0, 0, 0
	for _, r := range runs {
		if r.kindOf() != configMaps.Name {
			crs = r.Objects
			continue
		}
		if hi == 0 {
			lo, hi = r.Objects, r.Objects
		}
		lo, hi = min(lo, r.Objects), max(hi, r.Objects)
	}
	cr, crSmall := find(baselineName, true, hi), find(baselineName, true, lo)
	headline := func(gate bool) *shardedSummary {
		s := &shardedSummary{Objects: hi}
		if ks := find(nativeName, gate, hi); ks != nil && cr != nil {
			s.RSSRatio = ratio(ks.MaxPeakRSSMiB, cr.MaxPeakRSSMiB)
			if ks.RolloutMaxPeakRSSMiB > 0 {
				s.RSSRatioRollout = ratio(ks.RolloutMaxPeakRSSMiB, cr.MaxPeakRSSMiB)
			}
			s.FleetCPURatio = ratio(ks.FleetCPU, cr.FleetCPU)
			s.LiveHeapRatio = ratio(ks.MaxLiveHeapMiB, cr.MaxLiveHeapMiB)
			s.SteadyRSSRatio = ratio(ks.MaxSteadyRSSMiB, cr.MaxSteadyRSSMiB)
		}
		if ks := findKind(benchObjects.Name, nativeName, gate, crs); ks != nil {
			s.CustomResources, s.CustomResourceMode = crs, ks.CacheMode
			if cr := findKind(benchObjects.Name, baselineName, true, crs); cr != nil {
				s.RSSRatioCustomResources = ratio(ks.MaxPeakRSSMiB, cr.MaxPeakRSSMiB)
			}
		}
		if ks := find(nativeName, gate, lo); ks != nil && crSmall != nil {
			s.RSSRatioSmall = ratio(ks.MaxPeakRSSMiB, crSmall.MaxPeakRSSMiB)
		}
		if gate && cr != nil {
			s.IdleFloorRatio = ratio(cr.MinPeakRSSMiB, cr.MaxPeakRSSMiB)
		}
		if m := shardedHandoffRun(moves, gate); m != nil {
			ms := summariseShardedMoves(m)
			s.HandoffP99Seconds, s.FailoverSeconds, s.ObjectsListedPerMove = ms.HandoffP99Seconds, ms.FailoverSeconds, ms.ListedPerMove
			s.ThroughputRatio4, s.ratioGate = gateRatio(ms.ThroughputRatio4, m.Throughput, nativeName, func(t throughputResult) bool { return t.Epochs == epochsName(true) })
			s.ThroughputRatio4PerNamespace = m.ThroughputRatio4PerNamespace
		}
		if *s == (shardedSummary{Objects: hi}) {
			return nil
		}
		return s
	}
	return headline(true), headline(false)
}
