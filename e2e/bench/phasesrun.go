package main

import (
	"context"
	"fmt"
	"time"
)

// This file holds the steps of a run (benchRun.phaseSteps), one per phase
// or pair of phases; each calls the phase's measurement and records its
// figures in the results.

// rounds runs phases 1 and 2 in rounds, every configuration once per
// round, so that load from other tenants of the machine hits all of them
// alike. Phase 2 runs on p.ThroughputObjects objects, and the phases after
// it on p.Objects again.
func (r *benchRun) rounds(ctx context.Context) error {
	if r.p.Phases[2] {
		progress("phase 2: creating objects up to %d for the throughput rounds", r.p.ThroughputObjects)
		if err := r.b.ensureObserved(ctx, r.p.ThroughputObjects); err != nil {
			return err
		}
	}
	for round := 1; round <= r.p.Rounds; round++ {
		if r.p.Phases[1] {
			if err := r.ceilingRound(ctx, round); err != nil {
				return err
			}
		}
		if r.p.Phases[2] {
			if err := r.throughputRound(ctx, round); err != nil {
				return err
			}
		}
	}
	return r.b.shrinkObjects(ctx, r.p.Objects)
}

// ceilingRound measures phase 1, the API server's ceiling, at each
// goroutine count.
func (r *benchRun) ceilingRound(ctx context.Context, round int) error {
	for _, g := range r.p.CeilingWorkers {
		progress("round %d/%d, phase 1: API server ceiling with %d goroutines", round, r.p.Rounds, g)
		c, err := r.b.measureCeiling(ctx, g, r.p.CeilingDuration)
		if err != nil {
			return fmt.Errorf("phase 1 (ceiling): %w", err)
		}
		c.Round = round
		progress("  %.0f writes/s", c.WritesPerSec)
		r.res.Ceiling = append(r.res.Ceiling, c)
	}
	return nil
}

// throughputConfig is one configuration of phase 2: a system at a number
// of replicas and a latency, and the set its samples go to.
type throughputConfig struct {
	sys     *system
	n       int
	latency time.Duration
	set     *throughputSet
}

// throughputConfigs are phase 2's configurations in the order a round
// runs them: latency-bound, then write-bound.
func (r *benchRun) throughputConfigs() []throughputConfig {
	p, res := r.p, r.res
	configs := []throughputConfig{{r.baseline, p.BaselineReplicas, p.Latency, &res.Throughput}}
	for _, n := range p.Replicas {
		configs = append(configs, throughputConfig{r.kshard, n, p.Latency, &res.Throughput})
	}
	for _, n := range p.AdapterReplicas {
		configs = append(configs, throughputConfig{r.adapter, n, p.Latency, &res.Throughput})
	}
	configs = append(configs, throughputConfig{r.baseline, p.BaselineReplicas, 0, &res.WriteBound})
	for _, n := range p.WriteReplicas {
		configs = append(configs, throughputConfig{r.kshard, n, 0, &res.WriteBound})
	}
	return configs
}

// throughputRound measures phase 2, throughput, in each configuration.
func (r *benchRun) throughputRound(ctx context.Context, round int) error {
	for _, c := range r.throughputConfigs() {
		progress("round %d/%d, phase 2: %s with %d replicas, %s latency, %d objects", round, r.p.Rounds, c.sys.name, c.n, c.latency, len(r.b.gens))
		t, err := r.b.throughput(ctx, c.sys, c.n, c.latency, fmt.Sprintf("%d-%d-%d", round, c.n, c.latency.Milliseconds()))
		if err != nil {
			return fmt.Errorf("phase 2 (throughput, %s, %d replicas, %s latency): %w", c.sys.name, c.n, c.latency, err)
		}
		t.Round = round
		t.logProgress()
		c.set.Samples = append(c.set.Samples, t)
	}
	return nil
}

// handoff measures phase 3, the graceful handoff of a rolling restart, on
// each system.
func (r *benchRun) handoff(ctx context.Context) error {
	for _, sys := range r.systems {
		progress("phase 3: graceful handoff, rolling restart of %d %s replicas", r.p.HandoffReplicas, sys.name)
		h, err := r.b.handoff(ctx, sys, r.p.HandoffReplicas)
		if err != nil {
			return fmt.Errorf("phase 3 (handoff, %s): %w", sys.name, err)
		}
		progress("  rollout p99 %.3fs, max %.3fs over %d updates (steady p99 %.3fs)", h.Rollout.P99Seconds, h.Rollout.MaxSeconds, h.Rollout.Updates, h.Steady.P99Seconds)
		r.res.Handoff = append(r.res.Handoff, h)
	}
	return nil
}

// failover measures phase 4, crash failover, on each system.
func (r *benchRun) failover(ctx context.Context) error {
	for _, sys := range r.systems {
		progress("phase 4: crash failover of %s (%d replicas)", sys.name, r.p.HandoffReplicas)
		f, err := r.b.failover(ctx, sys, r.p.HandoffReplicas)
		if err != nil {
			return fmt.Errorf("phase 4 (failover, %s): %w", sys.name, err)
		}
		progress("  %s killed; %s reconciled again after %.2fs", f.Killed, f.Key, f.Seconds)
		r.res.Failover = append(r.res.Failover, f)
	}
	return nil
}

// restartFailover measures phase 6, crash failover restarted in place
// against the lease wait, on kshard and, in full runs, on the adapter.
func (r *benchRun) restartFailover(ctx context.Context) error {
	p := r.p
	progress("phase 6: crash failover restarted in place vs. lease wait, %d kills each, %d kshard replicas in pods", p.RestartKills, p.HandoffReplicas)
	rf, err := r.b.restartFailover(ctx, r.kshard, p.HandoffReplicas, p.RestartKills)
	if err != nil {
		return fmt.Errorf("phase 6 (restart failover): %w", err)
	}
	logRestartFailover(rf)
	r.res.RestartFailover = &rf
	if p.Quick {
		return nil
	}
	progress("phase 6: the same on the adapter, %d replicas in pods", p.HandoffReplicas)
	af, err := r.b.restartFailover(ctx, r.adapter, p.HandoffReplicas, p.RestartKills)
	if err != nil {
		return fmt.Errorf("phase 6 (restart failover, adapter): %w", err)
	}
	logRestartFailover(af)
	r.res.RestartFailoverAdapter = &af
	return nil
}

func logRestartFailover(rf restartFailoverResult) {
	progress("  restarted in place p50 %.2fs p99 %.2fs; lease wait p50 %.2fs p99 %.2fs", rf.InPlaceP50, rf.InPlaceP99, rf.LeaseWaitP50, rf.LeaseWaitP99)
}

// sharded runs phase 7, the sharded cache's resources (sharded.go).
func (r *benchRun) sharded(ctx context.Context) error {
	runs, err := r.b.shardedPhase(ctx, r.kshard, r.baseline)
	r.res.ShardedRuns = runs
	if err != nil {
		return fmt.Errorf("phase 7 (sharded cache): %w", err)
	}
	return nil
}

// shardedHandoff runs phase 8, the sharded cache's throughput, handoff
// and failover (shardedhandoff.go).
func (r *benchRun) shardedHandoff(ctx context.Context) error {
	runs, err := r.b.shardedHandoffPhase(ctx, r.kshard, r.baseline)
	r.res.ShardedHandoff = runs
	if err != nil {
		return fmt.Errorf("phase 8 (sharded cache handoff): %w", err)
	}
	return nil
}

// scale runs phase 9, the scale envelope (scale.go).
func (r *benchRun) scale(ctx context.Context) error {
	sc, err := r.b.scalePhase(ctx, r.kshard, r.baseline)
	r.res.Scale = sc
	if err != nil {
		return fmt.Errorf("phase 9 (scale): %w", err)
	}
	return nil
}

// labels runs phase 10, the gate-free sharded cache (labels.go).
func (r *benchRun) labels(ctx context.Context) error {
	lr, err := r.b.labelsPhase(ctx, r.kshard, r.baseline, r.adapter)
	r.res.Labels = lr
	if err != nil {
		return fmt.Errorf("phase 10 (gate-free sharded cache): %w", err)
	}
	return nil
}

// resources measures phase 5, each system's resources, at
// -resource-objects objects, which it creates first.
func (r *benchRun) resources(ctx context.Context) error {
	p := r.p
	progress("phase 5: creating objects up to %d", p.ResourceObjects)
	if err := r.b.ensureObserved(ctx, p.ResourceObjects); err != nil {
		return err
	}
	for _, sys := range r.systems {
		progress("phase 5: resources of %d %s replicas at %d objects", p.ResourceReplicas, sys.name, len(r.b.gens))
		rr, err := r.b.resources(ctx, sys, p.ResourceReplicas)
		if err != nil {
			return fmt.Errorf("phase 5 (resources, %s): %w", sys.name, err)
		}
		progress("  peak RSS %.0f MiB, %.0f API requests/min, %.0f Lease writes/min", rr.MaxPeakRSSMiB, rr.APIRequestsPerMin, rr.LeaseWritesPerMin)
		r.res.Resources = append(r.res.Resources, rr)
	}
	return nil
}
