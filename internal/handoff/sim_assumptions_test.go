package handoff_test

import (
	"flag"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/internal/handoffsim"
)

// The tests that measure the simulation's faults against two of the core's
// assumptions (doc.go): clocks that run at different rates, and a watch
// that shows an older state of a peer's Lease after a newer one. The faults
// themselves are internal/handoffsim's (assumptions.go); every simulation
// run has them on, TestSimulation's and shard/ring's TestCoordinatorSimulation
// too.

var (
	simClockSkew = flag.Int64("handoff.clockskew", handoffsim.DefaultClockSkewPPM, "clock-rate fault: a replica's clock runs at 1 ± up to this many ppm (0: no such fault)")
	simAcross    = flag.Bool("handoff.staleacross", false, "stale views may show an earlier incarnation's state (a case the core does not defend against), to measure it")
	simClockLong = flag.Bool("handoff.clocklong", false, "run as the clock-rate tests do: 30–70 s of faults, no stale views")
	simCollect   = flag.Bool("handoff.collect", false, "every seed collects expired Leases within it (handoffsim.Options.CollectEarly; by default a quarter do)")
	simSweep     = flag.String("handoff.sweep", "", "TestSimulationClockRateSweep: comma-separated clock skews in percent (e.g. 5,8,9,10,12,15,20)")
)

// simOptions are the simulation's Options as the flags set them.
func simOptions() handoffsim.Options {
	skew := *simClockSkew
	if skew == 0 {
		skew = -1 // the flag's 0: no clock-rate fault
	}
	if *simClockLong {
		return clockOptions(skew)
	}
	return handoffsim.Options{ClockSkewPPM: skew, StaleAcross: *simAcross, CollectEarly: *simCollect}
}

// clockOptions set up a run for the clock-rate measurements: clocks within
// ±ppm and faults for 30–70 s instead of 1–21 s (Options.LongFaults), no
// stale views.
func clockOptions(ppm int64) handoffsim.Options {
	return handoffsim.Options{ClockSkewPPM: ppm, NoStaleViews: true, LongFaults: true}
}

func TestClockRateBound(t *testing.T) {
	got := handoffsim.ClockRateBound(handoff.Timing{})
	if want := 1.0 / 11; got < want-1e-9 || got > want+1e-9 {
		t.Fatalf("ClockRateBound(defaults) = %v, want 1/11", got)
	}
	if handoffsim.DefaultClockSkewPPM >= int64(got*1e6) {
		t.Fatalf("the simulation's default clock skew (%d ppm) is not within the bound (%.0f ppm)", handoffsim.DefaultClockSkewPPM, got*1e6)
	}
}

// clockSeeds is how many seeds TestSimulationClockRate runs in CI. The
// mutant reuseepoch runs with these options and must be caught within them
// (mutantRun): at the ring's default Load 1.05 its first catch is seed 1050
// (at 1.25 it was 327), so 1,200 keep the real core shown clean there.
const clockSeeds = 1200

// TestSimulationClockRate runs the simulation with clocks within ±8 %
// (DefaultClockSkewPPM, inside ClockRateBound) and long fault windows: no
// violation. Replay a failing seed with -handoff.seed=S -handoff.clocklong.
func TestSimulationClockRate(t *testing.T) {
	opts := clockOptions(handoffsim.DefaultClockSkewPPM)
	r := handoffsim.RunSeeds(*simFirst, clockSeeds, opts)
	t.Logf("clock skew ±%d ppm, 30–70 s of faults: seeds=%d steps=%d violations=%d (safety %d), %d clock-rate changes, in %v",
		handoffsim.DefaultClockSkewPPM, r.Seeds, r.Steps, r.Violations, r.Safety, r.ClockFaults, r.Elapsed.Round(time.Millisecond))
	if r.Violations > 0 {
		opts.Trace = true
		w := handoffsim.Run(r.First, opts)
		t.Fatalf("seed %d: %s\ntrace:\n%s", r.First, w.Violation, w.Trace)
	}
}

// TestSimulationFindsClockRateBeyondBound shows the clock-rate fault is
// real: with clocks running at 0.5×–1.5× (far beyond ClockRateBound) the
// simulation finds a Lease voided while its holder still runs something,
// or two replicas active at once.
func TestSimulationFindsClockRateBeyondBound(t *testing.T) {
	opts := clockOptions(500_000)
	opts.StopAtSafety = true
	r := handoffsim.RunSeeds(0, 2000, opts)
	t.Logf("clock skew ±50%%, 30–70 s of faults: seeds=%d steps=%d violations=%d (safety %d) in %v; first: seed %d: %s",
		r.Seeds, r.Steps, r.Violations, r.Safety, r.Elapsed.Round(time.Millisecond), r.First, r.FirstViolation)
	if r.Safety == 0 {
		t.Fatal("no safety violation with clocks at 0.5×–1.5×: the clock-rate fault does not reach the core")
	}
}

// TestSimulationClockRateSweep measures, for each clock skew given with
// -handoff.sweep (percent), how many seeds of -handoff.seeds (from
// -handoff.first) break the invariant, set up as TestSimulationClockRate:
// 0 below ClockRateBound, some beyond it. Not part of CI (make
// sim-assumptions).
func TestSimulationClockRateSweep(t *testing.T) {
	if *simSweep == "" {
		t.Skip("a long measurement: run with -handoff.sweep=5,8,9,10,12,15,20 (make sim-assumptions)")
	}
	t.Logf("ClockRateBound with the default timing: ±%.2f%%", 100*handoffsim.ClockRateBound(handoff.Timing{}))
	for _, f := range strings.Split(*simSweep, ",") {
		pct, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || pct < 0 || pct >= 100 {
			t.Fatalf("-handoff.sweep: %q is not a percentage in [0, 100)", f)
		}
		ppm := int64(pct * 1e4)
		if ppm == 0 {
			ppm = -1 // no clock-rate fault
		}
		r := handoffsim.RunSeeds(*simFirst, *simSeeds, clockOptions(ppm))
		t.Logf("clock skew ±%g%%, 30–70 s of faults: seeds=%d steps=%d violations=%d (safety %d) clock faults=%d in %v; e.g. seed %d: %s",
			pct, r.Seeds, r.Steps, r.Violations, r.Safety, r.ClockFaults, r.Elapsed.Round(time.Millisecond), r.First, r.FirstViolation)
	}
}
