package main

import (
	"strings"
	"testing"
	"time"
)

func TestLatencyForKeepsFourReplicasWithinAThirdOfTheCapacity(t *testing.T) {
	for _, c := range []struct {
		workers  int
		capacity float64
		want     time.Duration
	}{
		{4, 490, 100 * time.Millisecond},  // 12 × 4 ÷ 490 = 98.0 ms
		{4, 1200, 40 * time.Millisecond},  // exactly 40 ms: 4 × 4 ÷ 0.04 = 400 = 1200 ÷ 3
		{4, 10000, 10 * time.Millisecond}, // never below one step
		{16, 649, 300 * time.Millisecond}, // 12 × 16 ÷ 649 = 295.8 ms: this machine's capacity
		{8, 490, 200 * time.Millisecond},
	} {
		got, err := latencyFor(c.workers, c.capacity)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("latencyFor(%d, %v) = %s, want %s", c.workers, c.capacity, got, c.want)
		}
		ideal := func(l time.Duration) float64 { return 4 * float64(c.workers) / l.Seconds() }
		if ideal(got) > c.capacity/3+1e-9 {
			t.Errorf("at %s 4 replicas ideally do %.0f/s, above a third of %v", got, ideal(got), c.capacity)
		}
		if less := got - 10*time.Millisecond; less > 0 && ideal(less) <= c.capacity/3 {
			t.Errorf("%s is not the smallest: %s keeps 4 replicas at %.0f/s too", got, less, ideal(less))
		}
	}
	for _, bad := range []struct {
		workers  int
		capacity float64
	}{{4, 0}, {0, 490}, {4, -1}} {
		if _, err := latencyFor(bad.workers, bad.capacity); err == nil || !strings.Contains(err.Error(), "positive") {
			t.Errorf("latencyFor(%d, %v) error = %v, want one saying both must be positive", bad.workers, bad.capacity, err)
		}
	}
}

// After the runs, the file says whether 4 × the leader's median rate
// stayed within a third of the capacity, and warns where it did not.
func TestCheckLeadersAgainstTheCapacity(t *testing.T) {
	p := defaultParams(false)
	p.Phases = map[int]bool{2: true}
	r := &results{Params: p, LatencyChoice: &latencyChoice{Source: latencyFromCapacity, Latency: "70ms", CapacityObjectsPerSec: 720}}
	r.Throughput.Samples = []throughputResult{
		{Round: 1, System: baselineName, LatencyMS: 70, ObjectsPerSec: 55},
		{Round: 2, System: baselineName, LatencyMS: 70, ObjectsPerSec: 57},
		{Round: 3, System: baselineName, LatencyMS: 70, ObjectsPerSec: 70},
		{Round: 1, System: nativeName, Replicas: 4, LatencyMS: 70, ObjectsPerSec: 220},
	}
	r.summarise()
	cs := r.LatencyChoice.Checks
	if len(cs) != 1 || cs[0].Phase != "2" || cs[0].LeaderObjectsPerSec != 57 || !cs[0].WithinShare {
		t.Fatalf("checks = %+v, want phase 2 at a median of 57/s, within a third of 720", cs)
	}
	if len(r.Warnings) != 0 {
		t.Errorf("warnings %v for a check that held", r.Warnings)
	}
	r.LatencyChoice.CapacityObjectsPerSec = 600
	r.summarise()
	r.summarise() // derived again: one warning, not two
	if cs := r.LatencyChoice.Checks; cs[0].WithinShare {
		t.Errorf("4 × 57 = 228 > 200 reported within a third of the capacity")
	}
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "above a third of the measured capacity (600") {
		t.Errorf("warnings = %q, want one naming the capacity", r.Warnings)
	}
	md := r.markdown()
	for _, want := range []string{"- Latency 70ms, chosen before the first round from the machine's capacity, 600 objects/s", "phase 2 4 × 57 = 228/s, **above it**"} {
		if !strings.Contains(md, want) {
			t.Errorf("RESULTS.md lacks %q", want)
		}
	}
}

// A 4-replica ratio is reported only where the machine was below 70 %
// busy in the kshard rounds (median); otherwise null, with the reason, a
// warning, and "not judged" in RESULTS.md.
func TestRatioJudgedOnlyBelowTheBusyLimit(t *testing.T) {
	samples := func(busy ...float64) []throughputResult {
		var out []throughputResult
		for i, b := range busy {
			out = append(out, throughputResult{Round: i + 1, System: nativeName, Replicas: 4, LatencyMS: 70, Objects: 2000, MachineBusy: b},
				throughputResult{Round: i + 1, System: nativeName, Replicas: 1, LatencyMS: 70, Objects: 2000, MachineBusy: 0.99})
		}
		return out
	}
	ratio := ptr(3.7)
	for _, c := range []struct {
		busy   []float64
		judged bool
		reason string
	}{
		{[]float64{0.5, 0.6, 0.95}, true, ""},
		{[]float64{0.7, 0.69, 0.9}, false, "machine 70 % busy"},
		{[]float64{0.97, 0.98, 0.99}, false, "machine 98 % busy"},
		{[]float64{0, 0, 0}, false, "machine load not recorded"},
	} {
		got, g := gateRatio(ratio, samples(c.busy...), nativeName, nil)
		if (got != nil) != c.judged || g.ThroughputRatio4NotJudged != c.reason {
			t.Errorf("busy %v: ratio %v, reason %q; want judged %t, reason %q", c.busy, got, g.ThroughputRatio4NotJudged, c.judged, c.reason)
		}
		if g.ThroughputRatio4Measured != ratio || g.ThroughputRatio4LatencyMS == nil || *g.ThroughputRatio4LatencyMS != 70 {
			t.Errorf("busy %v: gate %+v, want the measured ratio and 70 ms beside it", c.busy, g)
		}
	}
	// Runs of 5aeb9a8 recorded machine_busy without niced time and
	// machine_busy_all with it: the gate reads the whole machine, since
	// niced work did not yield to the benchmark.
	niced := samples(0.42, 0.45, 0.5)
	for i := range niced {
		niced[i].MachineBusyAll = niced[i].MachineBusy + 0.5
	}
	if got, g := gateRatio(ratio, niced, nativeName, nil); got != nil || g.ThroughputRatio4NotJudged != "machine 95 % busy" {
		t.Errorf("niced background of 50 %%: ratio %v, reason %q; want not judged, machine 95 %% busy", got, g.ThroughputRatio4NotJudged)
	}
	if got, g := gateRatio(nil, samples(0.5), nativeName, nil); got != nil || g != (ratioGate{}) {
		t.Errorf("no ratio: %v, %+v; want nothing recorded", got, g)
	}

	p := defaultParams(false)
	r := &results{Params: p}
	r.Throughput.Samples = append(samples(0.8, 0.85, 0.9),
		throughputResult{Round: 1, System: baselineName, Replicas: 2, LatencyMS: 70, ObjectsPerSec: 50},
		throughputResult{Round: 2, System: baselineName, Replicas: 2, LatencyMS: 70, ObjectsPerSec: 50},
		throughputResult{Round: 3, System: baselineName, Replicas: 2, LatencyMS: 70, ObjectsPerSec: 50})
	for i := range r.Throughput.Samples {
		if r.Throughput.Samples[i].System == nativeName {
			r.Throughput.Samples[i].ObjectsPerSec = 185
		}
	}
	r.summarise()
	if r.ThroughputRatio4 != nil || r.ThroughputRatio4NotJudged != "machine 85 % busy" || r.ThroughputRatio4Measured == nil || *r.ThroughputRatio4Measured != 3.7 {
		t.Errorf("throughput_ratio_4 %v, measured %v, reason %q; want null, 3.7, machine 85 %% busy", r.ThroughputRatio4, r.ThroughputRatio4Measured, r.ThroughputRatio4NotJudged)
	}
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "throughput_ratio_4 (3.70×) not judged: the machine was 85 % busy") {
		t.Errorf("warnings %q, want one naming the busy share", r.Warnings)
	}
	md := r.markdown()
	if !strings.Contains(md, "| 4 replicas ≥ 3.6× on the latency-bound workload (judged only with the machine below 70 % busy) | 3.70× (70 ms, machine 85 % busy) | not judged: machine 85 % busy |") {
		t.Error("RESULTS.md's goal row does not say the ratio was not judged for the machine's load")
	}
	if !strings.Contains(md, "| reported, not judged |") {
		t.Error("RESULTS.md still judges phase 2's write-bound ceiling fraction")
	}
	// A file from before the gate: the ratio, no busy share.
	old := &results{Params: p, Summary: Summary{ThroughputRatio4: ptr(3.25)}}
	if md := old.markdown(); !strings.Contains(md, "| 3.25× | not judged: machine load not recorded |") {
		t.Error("an old file's ratio is not rendered as not judged for want of load")
	}
}

// A phase kept from an earlier run says the latency it ran at, not this
// run's.
func TestSamplesLatency(t *testing.T) {
	if got := samplesLatency(70*time.Millisecond, []throughputResult{{LatencyMS: 20}, {LatencyMS: 20}, {LatencyMS: 0}}); got != 20*time.Millisecond {
		t.Errorf("samplesLatency = %s, want the samples' 20ms", got)
	}
	if got := samplesLatency(70*time.Millisecond, nil); got != 70*time.Millisecond {
		t.Errorf("samplesLatency without samples = %s, want the default 70ms", got)
	}
}
