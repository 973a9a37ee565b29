package main

import (
	"strings"
	"testing"
	"time"
)

func TestLatencyForKeepsFourReplicasBelowHalfTheCapacity(t *testing.T) {
	for _, c := range []struct {
		workers  int
		capacity float64
		want     time.Duration
	}{
		{4, 490, 70 * time.Millisecond},   // 8 × 4 ÷ 490 = 65.3 ms
		{4, 800, 40 * time.Millisecond},   // exactly 40 ms: 4 × 4 ÷ 0.04 = 400 = 800 ÷ 2
		{4, 10000, 10 * time.Millisecond}, // never below one step
		{8, 490, 140 * time.Millisecond},
	} {
		got, err := latencyFor(c.workers, c.capacity)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("latencyFor(%d, %v) = %s, want %s", c.workers, c.capacity, got, c.want)
		}
		ideal := func(l time.Duration) float64 { return 4 * float64(c.workers) / l.Seconds() }
		if ideal(got) > c.capacity/2+1e-9 {
			t.Errorf("at %s 4 replicas ideally do %.0f/s, above half of %v", got, ideal(got), c.capacity)
		}
		if less := got - 10*time.Millisecond; less > 0 && ideal(less) <= c.capacity/2 {
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
// stayed below half of the capacity, and warns where it did not.
func TestCheckLeadersAgainstTheCapacity(t *testing.T) {
	p := defaultParams(false)
	p.Phases = map[int]bool{2: true}
	r := &results{Params: p, LatencyChoice: &latencyChoice{Source: latencyFromCapacity, Latency: "70ms", CapacityObjectsPerSec: 480}}
	r.Throughput.Samples = []throughputResult{
		{Round: 1, System: baselineName, LatencyMS: 70, ObjectsPerSec: 55},
		{Round: 2, System: baselineName, LatencyMS: 70, ObjectsPerSec: 57},
		{Round: 3, System: baselineName, LatencyMS: 70, ObjectsPerSec: 70},
		{Round: 1, System: nativeName, Replicas: 4, LatencyMS: 70, ObjectsPerSec: 220},
	}
	r.summarise()
	cs := r.LatencyChoice.Checks
	if len(cs) != 1 || cs[0].Phase != "2" || cs[0].LeaderObjectsPerSec != 57 || !cs[0].BelowHalfOfTheCapacity {
		t.Fatalf("checks = %+v, want phase 2 at a median of 57/s, below half of 480", cs)
	}
	if len(r.Warnings) != 0 {
		t.Errorf("warnings %v for a check that held", r.Warnings)
	}
	r.LatencyChoice.CapacityObjectsPerSec = 400
	r.summarise()
	r.summarise() // derived again: one warning, not two
	if cs := r.LatencyChoice.Checks; cs[0].BelowHalfOfTheCapacity {
		t.Errorf("4 × 57 = 228 ≥ 200 reported below half of the capacity")
	}
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "not below half of the measured capacity (400") {
		t.Errorf("warnings = %q, want one naming the capacity", r.Warnings)
	}
	md := r.markdown()
	for _, want := range []string{"- Latency 70ms, chosen before the first round from the machine's capacity, 400 objects/s", "phase 2 4 × 57 = 228/s, **not below**"} {
		if !strings.Contains(md, want) {
			t.Errorf("RESULTS.md lacks %q", want)
		}
	}
}
