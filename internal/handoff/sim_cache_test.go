package handoff_test

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/kshard/kshard/internal/handoffsim"
)

var simCacheSeeds = flag.Int("handoff.cacheseeds", 3000, "seeds TestSimulationPartitionCache runs")

// TestSimulationPartitionCache runs the simulation with sharded caches:
// every partition a core holds is listed (slow now and then, failing and
// retried while the faults last), and besides the usual invariants the
// world checks that no partition activates before its LIST succeeded and
// that, once the faults stop, every partition still ends up active.
func TestSimulationPartitionCache(t *testing.T) {
	opts := simOptions()
	opts.PartitionCache = true
	if *simSeed >= 0 {
		handoffsim.Replay(t, uint64(*simSeed), opts)
		return
	}
	s := handoffsim.RunSeeds(*simFirst, *simCacheSeeds, opts)
	t.Logf("simulation with partition caches: seeds=%d steps=%d violations=%d in %v; LISTs %d (%d of 1-8 s, %d failed and retried); partitions handed over after waiting for the new owner's cache %d",
		s.Seeds, s.Steps, s.Violations, s.Elapsed.Round(time.Millisecond), s.Lists, s.SlowLists, s.FailedLists, s.Handovers)
	if s.Seeds >= 100 && (s.SlowLists == 0 || s.FailedLists == 0) {
		t.Errorf("no slow or no failing LIST in %d seeds: the cache fault did not run", s.Seeds)
	}
	if s.Seeds >= 100 && s.Handovers == 0 {
		t.Errorf("no partition was kept active for its new owner's cache in %d seeds: make before break did not run", s.Seeds)
	}
	handoffsim.ReportFailed(t, s, opts, "go test ./internal/handoff -run TestSimulationPartitionCache -handoff.seed=%d -v")
}

// TestSimulationFindsActivationBeforeCacheSync shows the oracle catches a
// core that activates without waiting for its cache.
func TestSimulationFindsActivationBeforeCacheSync(t *testing.T) {
	opts := handoffsim.Options{PartitionCache: true, IgnoreCacheSync: true, StopAtSafety: true}
	r := handoffsim.RunSeeds(0, 200, opts)
	t.Logf("partition caches, rule off: seeds=%d violations=%d (safety %d); first: seed %d: %s",
		r.Seeds, r.Violations, r.Safety, r.First, r.FirstViolation)
	if r.Safety == 0 || !strings.Contains(r.FirstViolation, "before its cache has listed it") {
		t.Fatal("no activation before the cache synced was found with the synced-before-act rule off")
	}
}

var simBalanceSeeds = flag.Int("handoff.balanceseeds", 1000, "seeds TestSimulationBalance runs")

// TestSimulationBalance runs the simulation with a balanced ring
// (handoffsim.Options.Balance): partitions move when their object counts
// are first reported, when they change and when a holder dies, on top of
// every fault of the partition-cache run. The invariants must hold, and the
// ring must settle within the liveness bound: weights that kept moving
// partitions would break it.
func TestSimulationBalance(t *testing.T) {
	opts := simOptions()
	opts.Balance = true
	if *simSeed >= 0 {
		handoffsim.Replay(t, uint64(*simSeed), opts)
		return
	}
	s := handoffsim.RunSeeds(*simFirst, *simBalanceSeeds, opts)
	t.Logf("simulation with a balanced ring: seeds=%d steps=%d violations=%d in %v; object counts changed %d times, weights published %d times; LISTs %d (%d failed), handovers %d",
		s.Seeds, s.Steps, s.Violations, s.Elapsed.Round(time.Millisecond), s.CountChanges, s.WeightReports, s.Lists, s.FailedLists, s.Handovers)
	if s.Seeds >= 100 && (s.CountChanges == 0 || s.WeightReports < s.Seeds) {
		t.Errorf("%d count changes and %d weight reports in %d seeds: the balanced ring did not run", s.CountChanges, s.WeightReports, s.Seeds)
	}
	handoffsim.ReportFailed(t, s, opts, "go test ./internal/handoff -run TestSimulationBalance -handoff.seed=%d -v")
}
