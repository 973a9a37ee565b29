package handoff_test

import (
	"flag"
	"testing"
	"time"

	"github.com/kshard/kshard/internal/handoffsim"
)

var simKeepSeeds = flag.Int("handoff.keepseeds", 2000, "seeds TestSimulationKeepPlace runs")

// TestSimulationKeepPlace runs the simulation with every identity keeping
// its place on a graceful leave (handoff.Config.KeepPlaceOnLeave) and
// sharded caches: leavers leave their Lease for the next incarnation, which
// takes it over at once and keeps the place while it joins; peers leave
// the place's partitions alone meanwhile. The invariants must hold, and
// every partition must settle within the liveness bound, whether the
// identity comes back or not.
func TestSimulationKeepPlace(t *testing.T) {
	opts := simOptions()
	opts.KeepPlace, opts.PartitionCache = true, true
	if *simSeed >= 0 {
		handoffsim.Replay(t, uint64(*simSeed), opts)
		return
	}
	s := handoffsim.RunSeeds(*simFirst, *simKeepSeeds, opts)
	t.Logf("simulation keeping places on leave: seeds=%d steps=%d violations=%d in %v; graceful leaves %d, of which left for the next incarnation %d; returns %d",
		s.Seeds, s.Steps, s.Violations, s.Elapsed.Round(time.Millisecond), s.Leaves, s.KeptPlaces, s.Returns)
	if s.Seeds >= 100 && (s.KeptPlaces == 0 || s.Returns == 0) {
		t.Errorf("no leave kept its place (%d) or no incarnation returned to one (%d) in %d seeds: the scenario did not run", s.KeptPlaces, s.Returns, s.Seeds)
	}
	handoffsim.ReportFailed(t, s, opts, "go test ./internal/handoff -run TestSimulationKeepPlace -handoff.seed=%d -v")
}
