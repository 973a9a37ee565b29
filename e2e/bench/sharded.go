package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kshard/kshard/manager/kshardtest/controlplane"
)

// Phase 7 measures the sharded cache (manager.Options.PartitionBy
// namespace): per-replica memory and the fleet's CPU against the
// leader-elected controller-runtime operator, at object counts where the
// cache dominates memory. It runs on control planes of its own, so that
// the objects of the other phases do not sit in the all-namespace caches:
// one with the ShardedListAndWatch feature gate (kshard sharded beside
// controller-runtime) and, in full runs, one without it (kshard in the
// fallback: every object listed and cached, filtered on the client).

// shardedResult is one system's run of phase 7 at one object count.
type shardedResult struct {
	System     string `json:"system"`
	CacheMode  string `json:"cache_mode"` // kshard: sharded or fallback; controller-runtime: full
	Gate       bool   `json:"feature_gate"`
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
	// ObjectsListed sums kshard_cache_listed_objects_total over the fleet.
	ObjectsListed float64 `json:"objects_listed,omitempty"`
	// RolloutMaxPeakRSSMiB (kshard, gate on): after the pass the replicas
	// are restarted one by one, as a rollout does; the largest peak RSS of
	// the new processes. While one replica restarts the others hold its
	// partitions too, so every new process but the last peaks at its
	// share plus its part of a peer's (1.5× its share with 3 replicas):
	// what a memory limit must allow.
	RolloutMaxPeakRSSMiB float64 `json:"rollout_max_peak_rss_mib,omitempty"`
}

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
	// FleetCPURatio: CPU seconds of the whole kshard fleet ÷ the
	// controller-runtime fleet's, same work (goal ≤ 1.2).
	FleetCPURatio *float64 `json:"fleet_cpu_ratio"`
	// Phase 8: kshard's 4-replica latency-bound throughput ÷ the
	// controller-runtime leader's with phase 2's workload, one epoch
	// ConfigMap for every object (goal ≥ 3.6), graceful handoff p99 in a
	// rolling restart, crash failover, and objects listed per moved object
	// in the rolling restart (shardedMoveSummary).
	ThroughputRatio4 *float64 `json:"throughput_ratio_4"`
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
		created := 0
		for _, n := range b.p.ShardedObjects {
			progress("phase 7: %d objects over %d namespaces (feature gate %t)", n, b.p.ShardedNamespaces, gate)
			if err := sb.createSpread(ctx, created, n); err != nil {
				stop()
				return out, err
			}
			created = n
			systems := []*system{kshard}
			if gate {
				systems = []*system{baseline, kshard} // controller-runtime ignores the gate: measured once
			}
			for _, sys := range systems {
				r, err := sb.shardedRun(ctx, sys, n, gate)
				if err != nil {
					stop()
					return out, fmt.Errorf("%s at %d objects (gate %t): %w", sys.name, n, gate, err)
				}
				progress("  %s (%s): peak RSS max %.0f MiB min %.0f MiB, fleet CPU %.1fs, listed %.0f", r.System, r.CacheMode, r.MaxPeakRSSMiB, r.MinPeakRSSMiB, r.FleetCPU, r.ObjectsListed)
				out = append(out, r)
			}
		}
		stop()
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
	sb := &bench{p: b.p, cp: cp, client: client, dir: b.dir, ns: b.ns, spread: namespaces}
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
		ns := b.objectNamespace(i)
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name: objectName(i), Namespace: ns, Labels: map[string]string{labelKey: labelObject},
				// No epoch ConfigMap in these namespaces: the operators read
				// epoch 0.
				Annotations: map[string]string{annObserved: "1/0"},
			},
			Data: map[string]string{genKey: "1", "payload": "benchmark object " + strconv.Itoa(i)},
		}
		_, err := b.client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

// shardedRun starts sys (kshard: PartitionBy namespace, p.ShardedReplicas
// replicas; controller-runtime: its usual pair), waits until formed and
// idle, updates every object once, waits until every update is reconciled
// and the fleet is idle, and reads the replicas' CPU and peak RSS.
func (b *bench) shardedRun(ctx context.Context, sys *system, n int, gate bool) (shardedResult, error) {
	res := shardedResult{System: sys.name, Gate: gate, Objects: n, Namespaces: b.p.ShardedNamespaces, CacheMode: "full", Replicas: b.p.BaselineReplicas}
	b.fleetArgs = []string{"--all-namespaces"}
	if sys.kshard {
		b.fleetArgs = append(b.fleetArgs, b.shardedArgs()...)
		res.Replicas = b.p.ShardedReplicas
	}
	defer func() { b.fleetArgs = nil }()
	start := time.Now()
	f, err := b.startFleet(sys, fmt.Sprintf("shard-%d-%t", n, gate), res.Replicas, 0)
	if err != nil {
		return res, err
	}
	defer f.kill()
	if err := f.waitReady(ctx, readiness{minReconciles: float64(n), leaderWarm: float64(n), quiet: true}, b.p.ReadyTimeout); err != nil {
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
	if err := f.waitReady(ctx, readiness{minReconciles: before + float64(n), quiet: true}, b.p.ReadyTimeout); err != nil {
		return res, err
	}
	res.PassSeconds = time.Since(sent).Seconds()
	stats, err := f.stats()
	if err != nil {
		return res, err
	}
	res.CPUSeconds, res.PeakRSSMiB = map[string]float64{}, map[string]float64{}
	res.MinPeakRSSMiB = -1
	for id, s := range stats {
		res.CPUSeconds[id] = s.CPUSeconds
		res.FleetCPU += s.CPUSeconds
		rss := float64(s.PeakRSS) / (1 << 20)
		res.PeakRSSMiB[id] = rss
		res.MaxPeakRSSMiB = max(res.MaxPeakRSSMiB, rss)
		if res.MinPeakRSSMiB < 0 || rss < res.MinPeakRSSMiB {
			res.MinPeakRSSMiB = rss
		}
	}
	if sys.kshard {
		mode := "sharded"
		for _, r := range f.live() {
			m, err := scrape(ctx, r.metricsAddr)
			if err != nil {
				return res, err
			}
			res.ObjectsListed += m.sum("kshard_cache_listed_objects_total", nil)
			if m.sum("kshard_cache_mode", map[string]string{"mode": "sharded"}) == 0 {
				mode = "fallback"
			}
		}
		res.CacheMode = mode
		if want := map[bool]string{true: "sharded", false: "fallback"}[gate]; mode != want {
			return res, fmt.Errorf("kshard cached ConfigMaps in mode %s with the feature gate %t, want %s", mode, gate, want)
		}
	}
	if sys.kshard && gate {
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
			res.RolloutMaxPeakRSSMiB = max(res.RolloutMaxPeakRSSMiB, float64(s.PeakRSS)/(1<<20))
		}
		progress("  kshard after a rolling restart: peak RSS max %.0f MiB", res.RolloutMaxPeakRSSMiB)
	}
	if err := f.stopAll(); err != nil {
		b.warn("%s: %v", f.name, err)
	}
	return res, nil
}

// bumpSpread writes a new generation into object i of phase 7.
func (b *bench) bumpSpread(ctx context.Context, i int) error {
	b.gens[i]++
	patch, _ := json.Marshal(map[string]any{"data": map[string]string{genKey: strconv.Itoa(b.gens[i])}})
	ns := b.objectNamespace(i)
	_, err := b.client.CoreV1().ConfigMaps(ns).Patch(ctx, objectName(i), types.MergePatchType, patch, metav1.PatchOptions{})
	return err
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
	find := func(system string, gate bool, n int) *shardedResult {
		for i := range runs {
			if r := &runs[i]; r.System == system && r.Gate == gate && r.Objects == n {
				return r
			}
		}
		return nil
	}
	lo, hi := 0, 0
	for i, r := range runs {
		if i == 0 {
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
		}
		if ks := find(nativeName, gate, lo); ks != nil && crSmall != nil {
			s.RSSRatioSmall = ratio(ks.MaxPeakRSSMiB, crSmall.MaxPeakRSSMiB)
		}
		if gate && cr != nil {
			s.IdleFloorRatio = ratio(cr.MinPeakRSSMiB, cr.MaxPeakRSSMiB)
		}
		if m := shardedHandoffRun(moves, gate); m != nil {
			ms := summariseShardedMoves(m)
			s.ThroughputRatio4, s.HandoffP99Seconds, s.FailoverSeconds, s.ObjectsListedPerMove = ms.ThroughputRatio4, ms.HandoffP99Seconds, ms.FailoverSeconds, ms.ListedPerMove
			s.ThroughputRatio4PerNamespace = m.ThroughputRatio4PerNamespace
		}
		if *s == (shardedSummary{Objects: hi}) {
			return nil
		}
		return s
	}
	return headline(true), headline(false)
}
