package handoff_test

import (
	"flag"
	"testing"
	"time"

	"github.com/kshard/kshard/internal/handoffsim"
)

// simSeedsCI is how many seeds TestSimulation runs in make test.
const simSeedsCI = 10000

var (
	simSeeds = flag.Int("handoff.seeds", simSeedsCI, "number of seeds the deterministic simulation runs")
	simFirst = flag.Uint64("handoff.first", 0, "first seed of the run")
	simSeed  = flag.Int64("handoff.seed", -1, "replay this one seed and print its trace")
)

// TestSimulation runs the handoff core in the simulated world
// (internal/handoffsim) under many seeds and checks, at every step, that no
// partition is active on two replicas at once, that claims are dropped only
// after drain, that no replica's claims are voided while it still runs
// anything, and, once faults stop, that every partition ends up active on
// exactly one live member within the liveness bound. A failing seed prints
// its replayable trace. shard/ring's TestCoordinatorSimulation runs the same
// world with the real coordinator as the shell.
func TestSimulation(t *testing.T) {
	if *simSeed >= 0 {
		handoffsim.Replay(t, uint64(*simSeed), simOptions())
		return
	}
	s := handoffsim.RunSeeds(*simFirst, *simSeeds, simOptions())
	t.Logf("simulation: seeds=%d steps=%d violations=%d in %v (faults injected include %d third-party Lease edits, %d pauses, %d clock-rate changes within ±%d ppm and %d stale views)",
		s.Seeds, s.Steps, s.Violations, s.Elapsed.Round(time.Millisecond), s.Tampers, s.Pauses, s.ClockFaults, *simClockSkew, s.StaleViews)
	t.Logf("proofs of death the cores held at the end: %d; pods force-deleted while (or before the kubelet reported that) their process ended: %d",
		s.Proven, s.ForceDeletes)
	if s.Seeds >= 1000 && s.Proven == 0 {
		t.Errorf("no core was handed a proof of death in %d seeds: the simulated pods did not run", s.Seeds)
	}
	t.Logf("graceful leaves: %d; peers that missed the leaver's empty claim and waited LeaseDuration on a tombstone: %d",
		s.Leaves, s.LeaveTombstones)
	handoffsim.CheckFinalizerPaths(t, s)
	handoffsim.ReportFailed(t, s, simOptions(), "go test ./internal/handoff -run TestSimulation -handoff.seed=%d -v")
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
