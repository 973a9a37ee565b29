package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Phase 8 measures what phases 2-4 measure (latency-bound throughput at 4
// replicas, graceful handoff in a rolling restart, crash failover) with
// kshard on the sharded cache (PartitionBy namespace), and counts the
// objects the fleet lists in the rolling restart: each move lists only the
// moved partitions' objects. The objects are spread over namespaces, each
// with its own epoch ConfigMap, on control planes of the phase's own: one
// with the ShardedListAndWatch feature gate (kshard beside the
// controller-runtime leader) and, in full runs, one without it (kshard's
// fallback).

// shardedHandoffResult is phase 8 on one control plane.
type shardedHandoffResult struct {
	Gate      bool   `json:"feature_gate"`
	CacheMode string `json:"cache_mode"` // kshard's: sharded or fallback
	// Objects is the handoff's and failover's objects, ThroughputObjects
	// the throughput rounds' (params.ThroughputObjects; 0 in files from
	// before it, whose rounds ran on Objects).
	Objects           int `json:"objects"`
	ThroughputObjects int `json:"throughput_objects,omitempty"`
	Namespaces        int `json:"namespaces"`
	// Throughput holds, per round and per epoch layout, the
	// controller-runtime run (gate on only: it ignores the gate) and
	// kshard's 4-replica run.
	Throughput []throughputResult `json:"throughput"`
	// ThroughputRatio4 is the median over rounds of kshard's rate ÷ the
	// controller-runtime run's of the same round (for the gate-off runs,
	// the gate-on control plane's controller-runtime run of that round),
	// with phase 2's workload: one epoch ConfigMap, in a namespace every
	// kshard replica caches (SharedNamespaces), maps to every object.
	ThroughputRatio4 *float64 `json:"throughput_ratio_4"`
	// ThroughputRatio4PerNamespace is the same with an epoch ConfigMap in
	// each object namespace: a new epoch is 500 writes, not one.
	ThroughputRatio4PerNamespace *float64       `json:"throughput_ratio_4_epoch_per_namespace"`
	Handoff                      handoffResult  `json:"handoff"`
	Failover                     failoverResult `json:"failover"`
	// ConfigMaps is every ConfigMap on the control plane when the rolling
	// restart starts (the objects, an epoch ConfigMap per namespace, and
	// any other): what a full LIST returns.
	ConfigMaps int `json:"configmaps"`
}

// shardedHandoffPhase runs phase 8 on each control plane.
func (b *bench) shardedHandoffPhase(ctx context.Context, kshard, baseline *system) ([]shardedHandoffResult, error) {
	gates := []bool{true}
	if b.p.ShardedFallback {
		gates = append(gates, false)
	}
	var out []shardedHandoffResult
	var crRates map[epochRound]float64 // gate-on controller-runtime objects/s per round
	for _, gate := range gates {
		r, rates, err := b.shardedHandoffOn(ctx, kshard, baseline, gate, crRates)
		if err != nil {
			return out, fmt.Errorf("feature gate %t: %w", gate, err)
		}
		if gate {
			crRates = rates
		}
		out = append(out, r)
	}
	return out, nil
}

// shardedHandoffOn runs phase 8 on a new control plane with or without the
// gate. crRates are the controller-runtime rates to divide by when it does
// not run here (gate off); it returns the rates it measured.
func (b *bench) shardedHandoffOn(ctx context.Context, kshard, baseline *system, gate bool, crRates map[epochRound]float64) (shardedHandoffResult, map[epochRound]float64, error) {
	res := shardedHandoffResult{Gate: gate, Objects: b.p.Objects, ThroughputObjects: b.p.ThroughputObjects, Namespaces: b.p.ShardedNamespaces, CacheMode: "sharded"}
	if !gate {
		res.CacheMode = "fallback"
	}
	sb, stop, err := b.shardedBench(ctx, gate, b.p.ShardedNamespaces)
	if err != nil {
		return res, nil, err
	}
	defer stop()
	sb.obs = newObserver()
	obsCtx, stopObs := context.WithCancel(ctx)
	obsDone, err := sb.obs.run(obsCtx, sb.cp.Config(), sb.objs.kind, "")
	defer func() { stopObs(); <-obsDone }()
	if err != nil {
		return res, nil, err
	}
	progress("phase 8: %d objects over %d namespaces for the throughput rounds (feature gate %t)", b.p.ThroughputObjects, sb.spread, gate)
	if err := sb.ensureObserved(ctx, b.p.ThroughputObjects); err != nil {
		return res, nil, err
	}

	rates := map[epochRound]float64{}
	ratios := map[bool][]float64{} // by shared epoch
	for round := 1; round <= b.p.Rounds; round++ {
		systems := []struct {
			sys  *system
			n    int
			args []string
		}{{baseline, b.p.BaselineReplicas, []string{"--all-namespaces"}}, {kshard, 4, append([]string{"--all-namespaces"}, b.shardedArgs()...)}}
		if !gate {
			systems = systems[1:]
		}
		for _, shared := range []bool{true, false} {
			if err := sb.useEpochs(ctx, shared); err != nil {
				return res, nil, err
			}
			for _, s := range systems {
				sb.fleetArgs = s.args
				if shared {
					sb.fleetArgs = append(slices.Clone(s.args), "--epoch-namespace="+sb.ns)
					if s.sys.kshard {
						sb.fleetArgs = append(sb.fleetArgs, "--shared-namespaces="+sb.ns)
					}
				}
				progress("round %d/%d, phase 8: %s with %d replicas, %s latency, %s (feature gate %t)", round, b.p.Rounds, s.sys.name, s.n, b.p.Latency, epochsName(shared), gate)
				t, err := sb.throughput(ctx, s.sys, s.n, b.p.Latency, fmt.Sprintf("sh-%t-%t-%d", gate, shared, round))
				if err != nil {
					return res, nil, fmt.Errorf("throughput, %s, %s: %w", s.sys.name, epochsName(shared), err)
				}
				t.Round, t.Epochs = round, epochsName(shared)
				t.logProgress()
				for _, s := range t.Shares {
					progress("    %s: %d objects, first at %.2fs, last at %.2fs", s.ID, s.Objects, s.FirstSeconds, s.Seconds)
				}
				res.Throughput = append(res.Throughput, t)
				key := epochRound{shared, round}
				if !s.sys.kshard {
					rates[key] = t.ObjectsPerSec
				} else if cr := map[bool]map[epochRound]float64{true: rates, false: crRates}[gate][key]; cr > 0 {
					ratios[shared] = append(ratios[shared], t.ObjectsPerSec/cr)
				}
			}
		}
	}
	res.ThroughputRatio4 = medianPtr(ratios[true])
	res.ThroughputRatio4PerNamespace = medianPtr(ratios[false])

	// The handoff and failover run on b.p.Objects, and read the epochs of
	// their namespaces.
	if err := sb.shrinkObjects(ctx, b.p.Objects); err != nil {
		return res, nil, err
	}
	if err := sb.useEpochs(ctx, false); err != nil {
		return res, nil, err
	}
	// Phase 7's fleet size: with 3 replicas a rolling restart of the
	// fallback lists everything 3 times, the sharded cache only what moves.
	n := b.p.ShardedReplicas
	sb.fleetArgs = append([]string{"--all-namespaces"}, sb.shardedArgs()...)
	defer func() { sb.fleetArgs = nil }()
	all, err := sb.client.CoreV1().ConfigMaps(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return res, nil, err
	}
	res.ConfigMaps = len(all.Items)
	progress("phase 8: graceful handoff, rolling restart of %d kshard replicas (feature gate %t)", n, gate)
	if res.Handoff, err = sb.handoff(ctx, kshard, n); err != nil {
		return res, nil, fmt.Errorf("handoff: %w", err)
	}
	progress("  rollout p99 %.3fs, max %.3fs over %d updates; %.0f objects listed in the rollout (%d ConfigMaps)", res.Handoff.Rollout.P99Seconds, res.Handoff.Rollout.MaxSeconds, res.Handoff.Rollout.Updates, res.Handoff.ObjectsListed, res.ConfigMaps)
	progress("phase 8: crash failover (%d kshard replicas, feature gate %t)", n, gate)
	if res.Failover, err = sb.failover(ctx, kshard, n); err != nil {
		return res, nil, fmt.Errorf("failover: %w", err)
	}
	progress("  %s killed; %s reconciled again after %.2fs", res.Failover.Killed, res.Failover.Key, res.Failover.Seconds)
	return res, rates, nil
}

// epochRound names a throughput run of phase 8: the epoch layout (one
// shared epoch ConfigMap, or one per namespace) and the round.
type epochRound struct {
	shared bool
	round  int
}

func epochsName(shared bool) string {
	if shared {
		return "one epoch"
	}
	return "epoch per namespace"
}

// shardedMoveSummary is phase 8's headline for one control plane.
type shardedMoveSummary struct {
	ThroughputRatio4  *float64
	HandoffP99Seconds *float64
	FailoverSeconds   *float64
	// ListedPerMove: objects listed in the rolling restart ÷ the objects
	// whose partitions moved in it. Each replica's share moves away at its
	// stop and back at its start, so a rolling restart moves every
	// ConfigMap twice: 1.0 lists exactly the moved partitions; a full
	// cache lists everything at every start (replicas ÷ 2).
	ListedPerMove *float64
}

func summariseShardedMoves(r *shardedHandoffResult) shardedMoveSummary {
	s := shardedMoveSummary{ThroughputRatio4: r.ThroughputRatio4}
	if r.Handoff.Rollout.Updates > 0 {
		s.HandoffP99Seconds = ptr(r.Handoff.Rollout.P99Seconds)
	}
	if r.Failover.Seconds > 0 {
		s.FailoverSeconds = ptr(r.Failover.Seconds)
	}
	s.ListedPerMove = ratio(r.Handoff.ObjectsListed, float64(2*r.ConfigMaps))
	return s
}

// shardedHandoffRun finds the phase 8 run on the control plane with or
// without the gate.
func shardedHandoffRun(runs []shardedHandoffResult, gate bool) *shardedHandoffResult {
	i := slices.IndexFunc(runs, func(r shardedHandoffResult) bool { return r.Gate == gate })
	if i < 0 {
		return nil
	}
	return &runs[i]
}

// shardedHandoffRounds is how many throughput rounds phase 8 ran, from its
// samples: the phase may have been kept from a run with other -rounds.
func shardedHandoffRounds(hrs []shardedHandoffResult) int {
	n := 0
	for _, hr := range hrs {
		for _, t := range hr.Throughput {
			n = max(n, t.Round)
		}
	}
	return n
}

// spreadCaps renders beside r's ratios the caps by the keys' spread of
// its kshard rounds, one epoch (epoch per namespace), once when they
// agree: "; cap 3.97"; "" when its samples recorded no shares.
func (r *shardedHandoffResult) spreadCaps() string {
	byLayout := func(shared bool) *float64 {
		return spreadCap4(r.Throughput, nativeName, func(t throughputResult) bool { return t.Epochs == epochsName(shared) })
	}
	one, each := byLayout(true), byLayout(false)
	switch {
	case one == nil && each == nil:
		return ""
	case one != nil && each != nil && f2(one) != f2(each):
		return fmt.Sprintf("; cap %s (%s)", f2(one), f2(each))
	}
	return "; cap " + f2(cmp.Or(one, each))
}

// throughputOrNil is r's throughput runs, none when r is nil.
func (r *shardedHandoffResult) throughputOrNil() []throughputResult {
	if r == nil {
		return nil
	}
	return r.Throughput
}
