package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// The latency-bound workloads (phases 2, 8 and 10) measure how replicas add
// up only while the machine is not the limit: 4 replicas at 20 ms need 800
// objects/s ideally, more than 2 cores complete at all (about 490/s write
// bound), so that ratio measured the machine. A full run therefore measures
// the machine's capacity first and chooses the latency from it.

// Where a run's latency came from (latencyChoice.Source).
const (
	latencyFromCapacity = "chosen from the measured capacity"
	latencyGiven        = "given (-latency)"
	latencyQuick        = "quick run's default"
)

// latencyRule says how the latency is chosen from the capacity.
const latencyRule = "the smallest multiple of 10 ms at which 4 replicas' ideal rate (4 × workers ÷ latency) is at most half of the capacity: the controller-runtime leader's write-bound rate (no simulated latency) on the main control plane, one pass"

// latencyChoice is how the run's latency was set (results.json's
// "latency_choice"), and afterwards whether 4 × the leader's measured
// latency-bound rate stayed below half of the capacity in each phase this
// run measured.
type latencyChoice struct {
	Source string `json:"source"`
	// Latency is params.latency, as chosen or given.
	Latency string `json:"latency"`
	Rule    string `json:"rule,omitempty"`
	// CapacityObjectsPerSec: the leader's write-bound rate (Capacity's
	// objects/s); not part of any ratio.
	CapacityObjectsPerSec float64           `json:"capacity_objects_per_second,omitempty"`
	Capacity              *throughputResult `json:"capacity_run,omitempty"`
	Checks                []leaderCheck     `json:"leader_checks,omitempty"`
}

// leaderCheck: 4 × the leader's median latency-bound rate in one phase,
// against half of the capacity.
type leaderCheck struct {
	Phase                  string  `json:"phase"`
	LeaderObjectsPerSec    float64 `json:"leader_objects_per_second_median"`
	FourLeaders            float64 `json:"four_times_leader"`
	BelowHalfOfTheCapacity bool    `json:"below_half_of_the_capacity"`
}

// latencyFor is the latency latencyRule chooses for workers per replica and
// a capacity in objects/s.
func latencyFor(workers int, capacity float64) (time.Duration, error) {
	if workers < 1 || capacity <= 0 || math.IsInf(capacity, 0) || math.IsNaN(capacity) {
		return 0, fmt.Errorf("no latency for %d workers at a capacity of %v objects/s: both must be positive", workers, capacity)
	}
	const step = 10 * time.Millisecond
	// 4 × workers ÷ L ≤ capacity ÷ 2  ⇔  L ≥ 8 × workers ÷ capacity.
	least := 8 * float64(workers) / capacity * float64(time.Second)
	steps := max(1, int64(math.Ceil(least/float64(step)-1e-9)))
	return time.Duration(steps) * step, nil
}

// chooseLatency sets b.p.Latency from the machine's capacity when the run
// asks for it (p.ChooseLatency), and records where the latency came from
// (nil when no latency-bound phase runs).
func (b *bench) chooseLatency(ctx context.Context, baseline *system) (*latencyChoice, error) {
	switch {
	case b.p.Quick:
		return &latencyChoice{Source: latencyQuick, Latency: b.p.Latency.String()}, nil
	case !b.p.ChooseLatency && (b.p.Phases[2] || b.p.Phases[8] || b.p.Phases[10]):
		return &latencyChoice{Source: latencyGiven, Latency: b.p.Latency.String()}, nil
	case !b.p.ChooseLatency:
		return nil, nil
	}
	progress("capacity: controller-runtime's leader (%d replicas), no simulated latency, one pass over %d objects", b.p.BaselineReplicas, len(b.gens))
	c, err := b.throughputFor(ctx, baseline, b.p.BaselineReplicas, 0, "capacity", 0)
	if err != nil {
		return nil, err
	}
	c.logProgress()
	l, err := latencyFor(b.p.Workers, c.ObjectsPerSec)
	if err != nil {
		return nil, err
	}
	b.p.Latency = l
	progress("  latency %s: 4 replicas ideally %.0f objects/s, half of the capacity %.0f", l, 4*float64(b.p.Workers)/l.Seconds(), c.ObjectsPerSec/2)
	return &latencyChoice{Source: latencyFromCapacity, Latency: l.String(), Rule: latencyRule, CapacityObjectsPerSec: c.ObjectsPerSec, Capacity: &c}, nil
}

// checkLeaders fills lc.Checks from the phases this run measured with the
// chosen latency, and warns of each where 4 × the leader's rate was not
// below half of the capacity.
func (r *results) checkLeaders() {
	lc := r.LatencyChoice
	if lc == nil || lc.Source != latencyFromCapacity || lc.CapacityObjectsPerSec <= 0 {
		return
	}
	lc.Checks = nil
	add := func(phase string, samples []throughputResult, keep func(throughputResult) bool) {
		var rates []float64
		for _, t := range samples {
			if t.System == baselineName && t.LatencyMS > 0 && keep(t) {
				rates = append(rates, t.ObjectsPerSec)
			}
		}
		if len(rates) == 0 {
			return
		}
		m := median(rates)
		c := leaderCheck{Phase: phase, LeaderObjectsPerSec: m, FourLeaders: 4 * m, BelowHalfOfTheCapacity: 4*m < lc.CapacityObjectsPerSec/2}
		lc.Checks = append(lc.Checks, c)
		if !c.BelowHalfOfTheCapacity {
			r.warnOnce(fmt.Sprintf("phase %s: 4 × the leader's latency-bound rate (%.0f objects/s) is not below half of the measured capacity (%.0f objects/s): the machine may limit 4 replicas at %s", phase, c.FourLeaders, lc.CapacityObjectsPerSec, lc.Latency))
		}
	}
	all := func(throughputResult) bool { return true }
	if r.Params.Phases[2] {
		add("2", r.Throughput.Samples, all)
	}
	if r.Params.Phases[8] {
		if hr := shardedHandoffRun(r.ShardedHandoff, true); hr != nil {
			add("8", hr.Throughput, func(t throughputResult) bool { return t.Epochs == epochsName(true) })
		}
	}
	if r.Params.Phases[10] && r.Labels != nil {
		for _, l := range r.Labels.Layouts {
			if slices.Contains(r.Params.LabelsLayouts, l.Layout) {
				add("10 ("+l.Layout+")", l.Throughput.Samples, all)
			}
		}
	}
}

// warnOnce adds a warning to the results unless it is there already (the
// summary is derived again on every write).
func (r *results) warnOnce(msg string) {
	if !slices.ContainsFunc(r.Warnings, func(w string) bool { return strings.EqualFold(w, msg) }) {
		r.Warnings = append(r.Warnings, msg)
	}
}
