package main

import (
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSummaryTakesRatiosWithinRounds(t *testing.T) {
	r := &results{Params: defaultParams(false)}
	// Round 2 ran on a machine twice as loaded: every rate halves, the
	// per-round ratios stay the same.
	for round, scale := range map[int]float64{1: 1, 2: 0.5, 3: 1} {
		r.Ceiling = append(r.Ceiling, ceilingResult{Round: round, Goroutines: 16, WritesPerSec: 1000 * scale})
		r.Throughput.Samples = append(r.Throughput.Samples,
			throughputResult{Round: round, System: baselineName, Replicas: 2, ObjectsPerSec: 200 * scale},
			throughputResult{Round: round, System: "kshard", Replicas: 1, ObjectsPerSec: 190 * scale},
			throughputResult{Round: round, System: "kshard", Replicas: 4, ObjectsPerSec: 760 * scale})
		r.WriteBound.Samples = append(r.WriteBound.Samples,
			throughputResult{Round: round, System: baselineName, Replicas: 2, ObjectsPerSec: 600 * scale},
			throughputResult{Round: round, System: "kshard", Replicas: 4, ObjectsPerSec: 900 * scale})
	}
	r.summarise()
	for name, c := range map[string]struct {
		got  *float64
		want float64
	}{
		"throughput_ratio_1": {r.ThroughputRatio1, 0.95},
		"throughput_ratio_4": {r.ThroughputRatio4, 3.8},
		"ceiling_fraction_4": {r.CeilingFraction4, 0.9},
		"ceiling":            {r.CeilingWritesPerSec, 1000},
	} {
		if c.got == nil || *c.got < c.want-1e-9 || *c.got > c.want+1e-9 {
			t.Errorf("%s = %v, want %v", name, c.got, c.want)
		}
	}
	if r.ThroughputRatio2 != nil {
		t.Errorf("throughput_ratio_2 = %v, want null: 2 replicas did not run", *r.ThroughputRatio2)
	}
}

func TestWriteProducesEveryFile(t *testing.T) {
	dir := t.TempDir()
	r := &results{Params: defaultParams(true)}
	r.Throughput.Samples = []throughputResult{
		{Round: 1, System: baselineName, Replicas: 2, ActiveReplicas: 1, ObjectsPerSec: 150, Seconds: 1},
		{Round: 1, System: "kshard", Replicas: 4, ActiveReplicas: 4, ObjectsPerSec: 500, Seconds: 0.3},
	}
	r.Handoff = []handoffResult{{System: "kshard", Replicas: 2, Rollout: delayStats{Updates: 3, P99Seconds: 0.1}}}
	if err := r.write(dir); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"throughput_ratio_1", "throughput_ratio_2", "throughput_ratio_4", "ceiling_fraction_4",
		"handoff_p99_seconds", "handoff_p99_seconds_baseline", "failover_seconds", "failover_seconds_baseline", "rss_ratio"} {
		if _, ok := got[k]; !ok {
			t.Errorf("results.json lacks %q", k)
		}
	}
	if p := got["params"].(map[string]any); p["latency"] != (20 * time.Millisecond).String() {
		t.Errorf("params.latency = %v, want %q", p["latency"], "20ms")
	}
	f, err := os.Open(filepath.Join(dir, "throughput.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("throughput.png: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "RESULTS.md")); err != nil {
		t.Error(err)
	}
}

func TestParseObserved(t *testing.T) {
	for in, want := range map[string][2]int{"3/7": {3, 7}, "": {0, 0}, "x": {0, 0}, "2/": {2, 0}} {
		if g, e := parseObserved(in); g != want[0] || e != want[1] {
			t.Errorf("parseObserved(%q) = %d, %d; want %v", in, g, e, want)
		}
	}
}

// The sharded headlines take phase 7's largest object count, the
// controller-runtime leader (its largest replica) as the reference, its
// standby as the idle floor, and phase 8's run on the same control plane;
// the fallback's divide by the gate-on controller-runtime runs.
func TestShardedSummary(t *testing.T) {
	runs := []shardedResult{
		{System: baselineName, Gate: true, Objects: 10, MaxPeakRSSMiB: 100, MinPeakRSSMiB: 30, FleetCPU: 10},
		{System: nativeName, Gate: true, Objects: 10, MaxPeakRSSMiB: 50, FleetCPU: 12},
		{System: baselineName, Gate: true, Objects: 50, MaxPeakRSSMiB: 400, MinPeakRSSMiB: 40, FleetCPU: 40},
		{System: nativeName, Gate: true, Objects: 50, MaxPeakRSSMiB: 140, FleetCPU: 44},
		{System: nativeName, Gate: false, Objects: 50, MaxPeakRSSMiB: 420, FleetCPU: 90},
	}
	moves := []shardedHandoffResult{
		{Gate: true, Objects: 100, ConfigMaps: 100, ThroughputRatio4: ptr(3.7), Handoff: handoffResult{Rollout: delayStats{Updates: 9, P99Seconds: 0.25}, ObjectsListed: 210}, Failover: failoverResult{Seconds: 9.5}},
		{Gate: false, Objects: 100, ConfigMaps: 100, ThroughputRatio4: ptr(3.1), Handoff: handoffResult{Rollout: delayStats{Updates: 9, P99Seconds: 0.5}, ObjectsListed: 400}, Failover: failoverResult{Seconds: 9.75}},
	}
	s, fb := summariseSharded(runs, moves)
	if s == nil || fb == nil {
		t.Fatalf("headlines %v, %v; want both", s, fb)
	}
	for name, c := range map[string]struct {
		got  *float64
		want float64
	}{
		"rss_ratio":                        {s.RSSRatio, 0.35},
		"rss_ratio_smallest":               {s.RSSRatioSmall, 0.5},
		"idle_floor_ratio":                 {s.IdleFloorRatio, 0.1},
		"fleet_cpu_ratio":                  {s.FleetCPURatio, 1.1},
		"throughput_ratio_4":               {s.ThroughputRatio4, 3.7},
		"handoff_p99_seconds":              {s.HandoffP99Seconds, 0.25},
		"failover_seconds":                 {s.FailoverSeconds, 9.5},
		"objects_listed_per_move":          {s.ObjectsListedPerMove, 1.05},
		"sharded_fallback.rss_ratio":       {fb.RSSRatio, 1.05},
		"sharded_fallback.fleet_cpu_ratio": {fb.FleetCPURatio, 2.25},
		"sharded_fallback.throughput_4":    {fb.ThroughputRatio4, 3.1},
		"sharded_fallback.listed_per_move": {fb.ObjectsListedPerMove, 2},
	} {
		if c.got == nil || math.Abs(*c.got-c.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, c.got, c.want)
		}
	}
	if s.Objects != 50 {
		t.Errorf("objects %d, want the largest count 50", s.Objects)
	}
	if fb.IdleFloorRatio != nil || fb.RSSRatioSmall != nil {
		t.Errorf("fallback idle floor %v, smallest-count ratio %v; want none (not measured without the gate)", fb.IdleFloorRatio, fb.RSSRatioSmall)
	}
	if s, fb := summariseSharded(nil, nil); s != nil || fb != nil {
		t.Error("no runs must give no headline")
	}
}

func TestFormedSamplesKeepEachSystemsMedian(t *testing.T) {
	var f formedSamples
	kshard, baseline := &system{kshard: true}, &system{}
	for _, s := range []struct {
		sys  *system
		took float64
	}{{baseline, 0.9}, {kshard, 0.5}, {baseline, 0.6}, {kshard, 2.0}, {baseline, 0.7}, {kshard, 0.4}} {
		f.add(s.sys, s.took)
	}
	if f.KshardSeconds != 0.5 || f.CRSeconds != 0.7 {
		t.Errorf("medians kshard %v, controller-runtime %v; want 0.5 and 0.7", f.KshardSeconds, f.CRSeconds)
	}
	if f.Ratio == nil || math.Abs(*f.Ratio-0.5/0.7) > 1e-12 {
		t.Errorf("ratio %v, want %v", f.Ratio, 0.5/0.7)
	}
	if len(f.Kshard) != 3 || len(f.CR) != 3 {
		t.Errorf("samples kshard %v, controller-runtime %v; want 3 each", f.Kshard, f.CR)
	}
}
