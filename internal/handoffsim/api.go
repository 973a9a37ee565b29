package handoffsim

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Options configure a run of the simulation.
type Options struct {
	// Trace records a replayable trace of every seed run (slow; for one
	// seed).
	Trace bool
	// Shell builds the shell that drives each process's core. Nil: the
	// built-in shell, which feeds the core directly.
	Shell func(*Process) (Shell, error)
}

// Result is the outcome of one seed.
type Result struct {
	Seed uint64
	// Steps counts the world's events.
	Steps int
	// Violation describes the first broken invariant, "" when none broke.
	Violation string
	// Trace is the seed's trace when Options.Trace was set.
	Trace string
	// Tampers and Pauses count third-party Lease edits and process pauses
	// injected.
	Tampers, Pauses int
	// Leaves counts graceful leaves; LeaveTombstones, peers that missed a
	// leaver's empty claim and waited LeaseDuration on a tombstone.
	Leaves, LeaveTombstones int
	// Proven counts the proofs of death the cores held at the end (a core
	// and an ended process it was told had ended); ForceDeletes, pods
	// removed while, or before their kubelet reported that, their process
	// ended.
	Proven, ForceDeletes int
}

// Run plays one seed to its end and checks, at every step, that no
// partition is active on two processes at once, that claims are dropped
// only after drain, that no process's claims are voided while it still runs
// anything, and, once the faults stop, that every partition ends up active
// on exactly one live member within the liveness bound.
func Run(seed uint64, opts Options) Result {
	w := newWorld(seed, opts.Trace)
	w.newShell = opts.Shell
	w.run()
	r := Result{Seed: seed, Steps: w.steps, Violation: w.violation, Tampers: w.tampers, Pauses: w.pauses,
		Leaves: w.leaves, LeaveTombstones: w.leaveTombstones, Proven: w.provenCount(), ForceDeletes: w.kubelet.forceDeletes}
	if w.trace != nil {
		r.Trace = w.trace.String()
	}
	return r
}

// Summary adds up the results of many seeds.
type Summary struct {
	Seeds, Steps, Violations int64
	Tampers, Pauses          int64
	Leaves, LeaveTombstones  int64
	Proven, ForceDeletes     int64
	// Failed lists the seeds that broke an invariant, in no order.
	Failed []uint64
}

// RunSeeds runs the n seeds from first on, on GOMAXPROCS goroutines (each
// seed on one; seeds share nothing), without traces.
func RunSeeds(first uint64, n int, opts Options) Summary {
	opts.Trace = false
	var (
		next, steps, violations atomic.Int64
		tampers, pauses         atomic.Int64
		leaves, tombstones      atomic.Int64
		proven, forceDeletes    atomic.Int64
		mu                      sync.Mutex
		failed                  []uint64
		wg                      sync.WaitGroup
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				r := Run(first+uint64(i), opts)
				steps.Add(int64(r.Steps))
				tampers.Add(int64(r.Tampers))
				pauses.Add(int64(r.Pauses))
				leaves.Add(int64(r.Leaves))
				tombstones.Add(int64(r.LeaveTombstones))
				proven.Add(int64(r.Proven))
				forceDeletes.Add(int64(r.ForceDeletes))
				if r.Violation != "" {
					violations.Add(1)
					mu.Lock()
					failed = append(failed, r.Seed)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return Summary{Seeds: int64(n), Steps: steps.Load(), Violations: violations.Load(), Tampers: tampers.Load(),
		Pauses: pauses.Load(), Leaves: leaves.Load(), LeaveTombstones: tombstones.Load(),
		Proven: proven.Load(), ForceDeletes: forceDeletes.Load(), Failed: failed}
}
