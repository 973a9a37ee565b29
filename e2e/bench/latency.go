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

// capacityShare: 4 replicas' ideal latency-bound rate is at most
// 1/capacityShare of the capacity. At half of it (4 workers, 50 ms on a
// capacity of 649 objects/s) the labels-mode rounds kept the machine 72 %
// busy, above busyLimit, so that their ratio could not be judged.
const capacityShare = 3

// latencyRule says how the latency is chosen from the capacity.
const latencyRule = "the smallest multiple of 10 ms at which 4 replicas' ideal rate (4 × the latency-bound rounds' workers ÷ latency) is at most a third of the capacity: the controller-runtime leader's write-bound rate (no simulated latency) on the main control plane, over passes of at least a third of -write-bound-min (10 s by default: a first pass alone reads low while caches and connections warm up)"

// latencyChoice is how the run's latency was set (results.json's
// "latency_choice"), and afterwards whether 4 × the leader's measured
// latency-bound rate stayed within a third of the capacity in each phase
// this run measured.
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
// against a third of the capacity (capacityShare).
type leaderCheck struct {
	Phase               string  `json:"phase"`
	LeaderObjectsPerSec float64 `json:"leader_objects_per_second_median"`
	FourLeaders         float64 `json:"four_times_leader"`
	WithinShare         bool    `json:"within_a_third_of_the_capacity"`
}

// latencyFor is the latency latencyRule chooses for workers per replica and
// a capacity in objects/s.
func latencyFor(workers int, capacity float64) (time.Duration, error) {
	if workers < 1 || capacity <= 0 || math.IsInf(capacity, 0) || math.IsNaN(capacity) {
		return 0, fmt.Errorf("no latency for %d workers at a capacity of %v objects/s: both must be positive", workers, capacity)
	}
	const step = 10 * time.Millisecond
	// 4 × workers ÷ L ≤ capacity ÷ share  ⇔  L ≥ 4 × share × workers ÷ capacity.
	least := 4 * capacityShare * float64(workers) / capacity * float64(time.Second)
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
	progress("capacity: controller-runtime's leader (%d replicas), no simulated latency, passes over %d objects for at least %s", b.p.BaselineReplicas, len(b.gens), b.p.WriteBoundMin/3)
	c, err := b.throughputFor(ctx, baseline, b.p.BaselineReplicas, 0, "capacity", b.p.WriteBoundMin/3)
	if err != nil {
		return nil, err
	}
	c.logProgress()
	workers := b.p.throughputWorkers()
	l, err := latencyFor(workers, c.ObjectsPerSec)
	if err != nil {
		return nil, err
	}
	b.p.Latency = l
	progress("  latency %s at %d workers: 4 replicas ideally %.0f objects/s, a third of the capacity %.0f", l, workers, 4*float64(workers)/l.Seconds(), c.ObjectsPerSec/capacityShare)
	return &latencyChoice{Source: latencyFromCapacity, Latency: l.String(), Rule: latencyRule, CapacityObjectsPerSec: c.ObjectsPerSec, Capacity: &c}, nil
}

// checkLeaders fills lc.Checks from the phases this run measured with the
// chosen latency, and warns of each where 4 × the leader's rate was not
// within a third of the capacity.
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
		c := leaderCheck{Phase: phase, LeaderObjectsPerSec: m, FourLeaders: 4 * m, WithinShare: 4*m <= lc.CapacityObjectsPerSec/capacityShare}
		lc.Checks = append(lc.Checks, c)
		if !c.WithinShare {
			r.warnOnce(fmt.Sprintf("phase %s: 4 × the leader's latency-bound rate (%.0f objects/s) is above a third of the measured capacity (%.0f objects/s): the machine may limit 4 replicas at %s", phase, c.FourLeaders, lc.CapacityObjectsPerSec, lc.Latency))
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

// busyLimit: a 4-replica throughput ratio is judged only when the machine
// was busy for less than this share of its CPU (median over the kshard
// 4-replica rounds): above it the machine, not kshard, was the limit.
const busyLimit = 0.7

// ratioGate records beside a 4-replica latency-bound throughput ratio the
// latency and the machine's median busy share of the rounds it comes from,
// and why the ratio is not judged (then null) when the machine was the
// limit or its load was not recorded.
type ratioGate struct {
	// ThroughputRatio4Measured is the ratio as measured, also when it is
	// not judged.
	ThroughputRatio4Measured    *float64 `json:"throughput_ratio_4_measured,omitempty"`
	ThroughputRatio4LatencyMS   *float64 `json:"throughput_ratio_4_latency_ms,omitempty"`
	ThroughputRatio4MachineBusy *float64 `json:"throughput_ratio_4_machine_busy,omitempty"`
	ThroughputRatio4NotJudged   string   `json:"throughput_ratio_4_not_judged,omitempty"`
	// ThroughputRatio4SpreadCap is those rounds' median cap by the keys'
	// spread (throughputResult.SpreadCap): the ratio 4 ideal replicas
	// would reach, where the busiest one's share sets a round's time.
	ThroughputRatio4SpreadCap *float64 `json:"throughput_ratio_4_spread_cap,omitempty"`
}

// gateRatio judges ratio by the kshard (or adapter) 4-replica samples
// behind it (those keep accepts, of system): it returns the ratio to
// report (nil unless the median machine_busy was below busyLimit) and the
// gate to record.
func gateRatio(ratio *float64, samples []throughputResult, system string, keep func(throughputResult) bool) (*float64, ratioGate) {
	var latency, busy []float64
	for _, t := range ratioSamples(samples, system, keep) {
		latency = append(latency, t.LatencyMS)
		if t.cpuMeasured() {
			busy = append(busy, t.busy())
		}
	}
	g := ratioGate{ThroughputRatio4Measured: ratio, ThroughputRatio4LatencyMS: medianPtr(latency), ThroughputRatio4MachineBusy: medianPtr(busy),
		ThroughputRatio4SpreadCap: spreadCap4(samples, system, keep)}
	switch {
	case ratio == nil:
		return nil, ratioGate{}
	case g.ThroughputRatio4MachineBusy == nil:
		g.ThroughputRatio4NotJudged = "machine load not recorded"
	case *g.ThroughputRatio4MachineBusy >= busyLimit:
		g.ThroughputRatio4NotJudged = fmt.Sprintf("machine %.0f %% busy", 100**g.ThroughputRatio4MachineBusy)
	default:
		return ratio, g
	}
	return nil, g
}

// ratioSamples are the latency-bound 4-replica samples of system behind a
// ratio (those keep accepts; every one when keep is nil).
func ratioSamples(samples []throughputResult, system string, keep func(throughputResult) bool) []throughputResult {
	var out []throughputResult
	for _, t := range samples {
		if t.System == system && t.Replicas == 4 && t.LatencyMS > 0 && (keep == nil || keep(t)) {
			out = append(out, t)
		}
	}
	return out
}

// spreadCap4 is the median cap by the keys' spread of the samples behind
// a 4-replica ratio (ratioSamples); nil when none recorded its shares.
func spreadCap4(samples []throughputResult, system string, keep func(throughputResult) bool) *float64 {
	var caps []float64
	for _, t := range ratioSamples(samples, system, keep) {
		if c := t.spreadCap(); c > 0 {
			caps = append(caps, c)
		}
	}
	return medianPtr(caps)
}

// judgedGoal renders a throughput ratio's goal: not judged (with why) when
// the gate says so, else checked against at least limit. Files from before
// the gate hold no busy share: not judged either.
func judgedGoal(ratio *float64, g ratioGate, limit float64) string {
	switch {
	case g.ThroughputRatio4NotJudged != "":
		return "not judged: " + g.ThroughputRatio4NotJudged
	case ratio != nil && g.ThroughputRatio4MachineBusy == nil:
		return "not judged: machine load not recorded"
	}
	return goal(check(ratio, func(v float64) bool { return v >= limit }))
}

// measured is the ratio as measured: the gate's record, or ratio itself
// in files from before the gate.
func (g ratioGate) measured(ratio *float64) *float64 {
	if g.ThroughputRatio4Measured != nil {
		return g.ThroughputRatio4Measured
	}
	return ratio
}

// describe is the latency, busy share and cap by the keys' spread beside
// a ratio, " (70 ms, machine 55 % busy, cap 3.82 by the keys' spread)", or
// "" when none was recorded.
func (g ratioGate) describe() string {
	var parts []string
	if l := g.ThroughputRatio4LatencyMS; l != nil {
		parts = append(parts, fmt.Sprintf("%.0f ms", *l))
	}
	if b := g.ThroughputRatio4MachineBusy; b != nil {
		parts = append(parts, fmt.Sprintf("machine %.0f %% busy", 100**b))
	}
	if c := g.ThroughputRatio4SpreadCap; c != nil {
		parts = append(parts, capByTheSpread(*c))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// warnNotJudged warns of a ratio the machine's load kept from being
// judged.
func (r *results) warnNotJudged(name string, g ratioGate) {
	if g.ThroughputRatio4NotJudged != "" && g.ThroughputRatio4MachineBusy != nil {
		r.warnOnce(fmt.Sprintf("%s (%s×) not judged: the machine was %.0f %% busy in the kshard 4-replica rounds (median), at or above %.0f %%", name, f2(g.ThroughputRatio4Measured), 100**g.ThroughputRatio4MachineBusy, 100*busyLimit))
	}
}

// capByTheSpread renders a cap by the keys' spread: "cap 3.82 by the
// keys' spread".
func capByTheSpread(c float64) string { return fmt.Sprintf("cap %.2f by the keys' spread", c) }
