package handoff

import (
	"flag"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

var (
	simSeeds = flag.Int("handoff.seeds", 10000, "number of seeds the deterministic simulation runs")
	simFirst = flag.Uint64("handoff.first", 0, "first seed of the run")
	simSeed  = flag.Int64("handoff.seed", -1, "replay this one seed and print its trace")
)

// TestSimulation runs the handoff core in the simulated world (simworld_test.go)
// under many seeds and checks, at every step, that no partition is active on
// two replicas at once, that claims are dropped only after drain, that no
// replica's claims are voided while it still runs anything, and, once faults
// stop, that every partition ends up active on exactly one live member within
// the liveness bound. A failing seed prints its replayable trace.
func TestSimulation(t *testing.T) {
	if *simSeed >= 0 {
		w := newWorld(uint64(*simSeed), true)
		if *simClockLong {
			w = newWorldWith(uint64(*simSeed), true, clockWorld(*simClockSkew))
		}
		w.run()
		t.Logf("seed %d trace:\n%s", *simSeed, w.trace.String())
		t.Logf("simulation: seeds=1 steps=%d violations=%d", w.steps, btoi(w.violation != ""))
		if w.violation != "" {
			t.Fatalf("seed %d: %s", *simSeed, w.violation)
		}
		return
	}

	var (
		next, steps, violations atomic.Int64
		tampers, pauses         atomic.Int64
		clockFaults, staleViews atomic.Int64
		leaves, leaveTombstones atomic.Int64
		mu                      sync.Mutex
		failed                  []uint64
		wg                      sync.WaitGroup
	)
	n := int64(*simSeeds)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				seed := *simFirst + uint64(i)
				w := newWorld(seed, false)
				w.run()
				steps.Add(int64(w.steps))
				tampers.Add(int64(w.tampers))
				pauses.Add(int64(w.pauses))
				clockFaults.Add(int64(w.clockFaults))
				staleViews.Add(int64(w.staleViews))
				leaves.Add(int64(w.leaves))
				leaveTombstones.Add(int64(w.leaveTombstones))
				if w.violation != "" {
					violations.Add(1)
					mu.Lock()
					failed = append(failed, seed)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("simulation: seeds=%d steps=%d violations=%d (faults injected include %d third-party Lease edits, %d pauses, %d clock-rate changes within ±%d ppm and %d stale views)",
		n, steps.Load(), violations.Load(), tampers.Load(), pauses.Load(), clockFaults.Load(), *simClockSkew, staleViews.Load())
	t.Logf("graceful leaves: %d; peers that missed the leaver's empty claim and waited LeaseDuration on a tombstone: %d",
		leaves.Load(), leaveTombstones.Load())
	for i, seed := range failed {
		if i == 3 {
			t.Errorf("... and %d more failing seeds", len(failed)-i)
			break
		}
		w := newWorld(seed, true)
		w.run()
		t.Errorf("seed %d: %s\nreplay: go test ./shard/handoff -run TestSimulation -handoff.seed=%d -v\ntrace:\n%s",
			seed, w.violation, seed, w.trace.String())
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
