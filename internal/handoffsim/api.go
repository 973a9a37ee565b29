package handoffsim

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a run of the simulation.
type Options struct {
	// Trace records a replayable trace of every seed run (slow; for one
	// seed).
	Trace bool
	// Shell builds the shell that drives each process's core. Nil: the
	// built-in shell, which feeds the core directly.
	Shell func(*Process) (Shell, error)

	// ClockSkewPPM is the clock-rate fault: each process's clock runs at
	// 1 ± up to this many ppm (drawn when it starts, the extremes a third
	// of the time each, and redrawn now and then mid-run). 0:
	// DefaultClockSkewPPM; negative: no clock-rate fault, only the ordinary
	// drift of ±1 %.
	ClockSkewPPM int64
	// NoStaleViews turns off the stale-view fault, on by default: now and
	// then a process's informer shows an older state of a peer's Lease (of
	// the same incarnation) than it showed already, and catches up within
	// 3 s unless a newer write reaches it first.
	NoStaleViews bool
	// StaleAcross lets stale views show an earlier incarnation's state,
	// preferred when there is one: a case the core does not defend against
	// (see shard/handoff's package documentation), to measure it.
	StaleAcross bool
	// TrustWatchOrder turns off the cores' defence against stale views
	// (handoff.Core.SetTrustWatchOrder), to show the fault reaches them.
	TrustWatchOrder bool
	// LongFaults makes the faults last 30–70 s instead of 1–21 s: a
	// wrong expiry from clock rates needs a member active while faults go
	// on (a slow-clocked holder cut off from the API server, a fast-clocked
	// peer voiding it), and the join wait leaves little active time in a
	// short run.
	LongFaults bool
	// PartitionCache gives every process a sharded cache
	// (handoff.Config.PartitionCache): the partitions its core holds are
	// listed, slowly now and then, failing and retried while the faults
	// last, and the oracle checks that none activates before its LIST
	// succeeded.
	PartitionCache bool
	// IgnoreCacheSync makes the cores activate without waiting for their
	// caches (the oracle still checks), to show the check finds it.
	IgnoreCacheSync bool
	// StopAtSafety makes RunSeeds stop at the first safety violation
	// (liveness failures are counted but do not stop it): for runs meant
	// to find one.
	StopAtSafety bool
}

// withDefaults returns o with its documented defaults applied.
func (o Options) withDefaults() Options {
	if o.ClockSkewPPM == 0 {
		o.ClockSkewPPM = DefaultClockSkewPPM
	}
	return o
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
	// ClockFaults and StaleViews count clock-rate changes and stale views
	// injected.
	ClockFaults, StaleViews int
	// Lists, SlowLists and FailedLists count the sharded caches' LISTs
	// (Options.PartitionCache): all, those of a second or more, failures.
	Lists, SlowLists, FailedLists int
}

// Run plays one seed to its end and checks, at every step, that no
// partition is active on two processes at once, that claims are dropped
// only after drain, that no process's claims are voided while it still runs
// anything, and, once the faults stop, that every partition ends up active
// on exactly one live member within the liveness bound.
func Run(seed uint64, opts Options) Result {
	w := newWorld(seed, opts.withDefaults())
	w.run()
	r := Result{Seed: seed, Steps: w.steps, Violation: w.violation, Tampers: w.tampers, Pauses: w.pauses,
		Leaves: w.leaves, LeaveTombstones: w.leaveTombstones, Proven: w.provenCount(), ForceDeletes: w.kubelet.forceDeletes,
		ClockFaults: w.clockFaults, StaleViews: w.staleViews, Lists: w.lists, SlowLists: w.slowLists, FailedLists: w.failedLists}
	if w.trace != nil {
		r.Trace = w.trace.String()
	}
	return r
}

// Summary adds up the results of many seeds.
type Summary struct {
	// Seeds counts the seeds run (fewer than asked for when
	// Options.StopAtSafety stopped the run).
	Seeds, Steps, Violations int64
	Tampers, Pauses          int64
	Leaves, LeaveTombstones  int64
	Proven, ForceDeletes     int64
	ClockFaults, StaleViews  int64
	Lists, SlowLists         int64
	FailedLists              int64
	// Safety counts the violations of a safety invariant (the others are
	// liveness failures: a partition not settled in time).
	Safety int64
	// Failed lists the seeds that broke an invariant, in no order.
	Failed []uint64
	// First is a seed that broke a safety invariant if one did, else one
	// that broke liveness; FirstViolation, what broke.
	First          uint64
	FirstViolation string
	// Elapsed is the wall-clock time of the run.
	Elapsed time.Duration
}

// RunSeeds runs the n seeds from first on, on GOMAXPROCS goroutines (each
// seed on one; seeds share nothing), without traces. With
// opts.StopAtSafety it stops at the first safety violation.
func RunSeeds(first uint64, n int, opts Options) Summary {
	opts.Trace = false
	start := time.Now()
	var (
		next, seeds, steps      atomic.Int64
		violations, safety      atomic.Int64
		tampers, pauses         atomic.Int64
		leaves, tombstones      atomic.Int64
		proven, forceDeletes    atomic.Int64
		clockFaults, staleViews atomic.Int64
		lists, slow, failed     atomic.Int64
		stop                    atomic.Bool
		mu                      sync.Mutex
		sum                     Summary
		wg                      sync.WaitGroup
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for !stop.Load() {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				r := Run(first+uint64(i), opts)
				seeds.Add(1)
				steps.Add(int64(r.Steps))
				tampers.Add(int64(r.Tampers))
				pauses.Add(int64(r.Pauses))
				leaves.Add(int64(r.Leaves))
				tombstones.Add(int64(r.LeaveTombstones))
				proven.Add(int64(r.Proven))
				forceDeletes.Add(int64(r.ForceDeletes))
				clockFaults.Add(int64(r.ClockFaults))
				staleViews.Add(int64(r.StaleViews))
				lists.Add(int64(r.Lists))
				slow.Add(int64(r.SlowLists))
				failed.Add(int64(r.FailedLists))
				if r.Violation == "" {
					continue
				}
				violations.Add(1)
				isSafety := !strings.Contains(r.Violation, "liveness:")
				if isSafety {
					safety.Add(1)
				}
				mu.Lock()
				sum.Failed = append(sum.Failed, r.Seed)
				if sum.FirstViolation == "" || isSafety && strings.Contains(sum.FirstViolation, "liveness:") {
					sum.First, sum.FirstViolation = r.Seed, r.Violation
				}
				mu.Unlock()
				if isSafety && opts.StopAtSafety {
					stop.Store(true)
				}
			}
		})
	}
	wg.Wait()
	sum.Seeds, sum.Steps, sum.Violations, sum.Safety = seeds.Load(), steps.Load(), violations.Load(), safety.Load()
	sum.Tampers, sum.Pauses, sum.Leaves, sum.LeaveTombstones = tampers.Load(), pauses.Load(), leaves.Load(), tombstones.Load()
	sum.ClockFaults, sum.StaleViews = clockFaults.Load(), staleViews.Load()
	sum.Proven, sum.ForceDeletes = proven.Load(), forceDeletes.Load()
	sum.Lists, sum.SlowLists, sum.FailedLists = lists.Load(), slow.Load(), failed.Load()
	sum.Elapsed = time.Since(start)
	return sum
}

// Reporter is the part of testing.TB that ReportFailed uses.
type Reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

// ReportFailed reports up to three of s's failing seeds with their replayed
// traces; replay is the command that replays one, with %d for the seed.
func ReportFailed(t Reporter, s Summary, opts Options, replay string) {
	t.Helper()
	opts.Trace = true
	for i, seed := range s.Failed {
		if i == 3 {
			t.Errorf("... and %d more failing seeds", len(s.Failed)-i)
			return
		}
		r := Run(seed, opts)
		t.Errorf("seed %d: %s\nreplay: %s\ntrace:\n%s", seed, r.Violation, fmt.Sprintf(replay, seed), r.Trace)
	}
}

// Replay runs one seed with its trace (for a -seed flag): it logs the trace
// and fails on a violation.
func Replay(t interface {
	Reporter
	Logf(format string, args ...any)
}, seed uint64, opts Options) {
	t.Helper()
	opts.Trace = true
	r := Run(seed, opts)
	t.Logf("seed %d trace:\n%s", seed, r.Trace)
	t.Logf("simulation: seeds=1 steps=%d violations=%d", r.Steps, btoi(r.Violation != ""))
	if r.Violation != "" {
		t.Errorf("seed %d: %s", seed, r.Violation)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
