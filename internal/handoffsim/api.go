package handoffsim

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
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
	// (see internal/handoff's package documentation), to measure it.
	StaleAcross bool
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
	// Balance runs a balanced ring (shard.Config.Balance, Scheme
	// namespace) over sharded caches (it implies PartitionCache): every
	// partition holds a number of objects drawn per seed, which changes a
	// few times while the faults last; each cache counts the partitions it
	// has synced and its core publishes their weights, so partitions move
	// when counts are first reported, when they change and when a holder
	// dies. The invariants and the liveness bound stay the same: weights
	// decide placement, never who may run a partition.
	Balance bool
	// Labels gives every process the cache of a kind sharded by labels
	// (shard/cache's Labelled; it implies PartitionCache), over objects
	// that carry their partition in a label or no valid one (none,
	// garbled, out of range): some there at the start (all without a
	// valid label, as at a first start, all labelled, or a mix, a few
	// labelled for another partition), more created unlabelled while the
	// faults last, and a third party that strips, garbles and edits labels
	// to name another partition. Each process's views start before or
	// after the ring's first Hold reaches its cache; its label segments and
	// unlabelled views watch with lags of their own (now and then slow, or
	// listing again); its labeller writes the labels of its active
	// partitions, now and then slowly, failing and retrying while the
	// faults last. Besides the usual invariants the oracle checks that a
	// partition activates only once both views have listed it, that no
	// object of a partition a process runs is missing from its cache (but
	// for the documented stray; see checkObject), and, at the end, that
	// every object carries its own partition's label and is in the cache
	// of the process its partition is active on.
	Labels bool
	// LabelFixes are the changes to the cache as built that the model
	// applies (LabelFix); 0: the cache as shard/cache builds it, which
	// the simulation shows breaks the oracle in three ways.
	LabelFixes LabelFix
	// LabelsSyncIgnoresUnlabelled (with Labels) is a mutation: the caches
	// report a partition synced once its label segment has listed, whatever
	// the unlabelled view, to show the oracle finds it.
	LabelsSyncIgnoresUnlabelled bool
	// LabelsDropOnLeave (with Labels) is a mutation: an object that leaves
	// a view is dropped at once rather than kept served until a live read
	// decides, to show the oracle finds it.
	LabelsDropOnLeave bool
	// IgnoreCacheSync makes the cores activate without waiting for their
	// caches (the oracle still checks), to show the check finds it.
	IgnoreCacheSync bool
	// CollectEarly sets the cores' GarbageCollectAfter to 1–2
	// LeaseDurations in every seed, so that expired Leases are collected
	// within it; without it a quarter of the seeds do (the others keep the
	// default, 10, later than seeds end).
	CollectEarly bool
	// KeepPlace makes every identity's core keep its place in the ring on
	// a graceful leave (handoff.Config.KeepPlaceOnLeave) in every seed;
	// without it half the seeds draw, per identity, whether it does.
	KeepPlace bool
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
	if o.Labels {
		o.PartitionCache = true
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
	// KeptPlaces counts the graceful leaves that left their Lease for the
	// next incarnation (KeepPlace); Returns, the incarnations that took
	// such a Lease over and published their return.
	KeptPlaces, Returns int
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
	// Handovers counts partitions a core kept active until their new
	// owner's cache held them (or HandoverTimeout passed) before revoking.
	Handovers int
	// CountChanges counts the object counts changed (Options.Balance);
	// WeightReports, Records published with weights other than the
	// publisher's previous ones.
	CountChanges, WeightReports int
	// Finalizers: the seed's fleet writes the member finalizer (3 seeds in
	// 4). Terminations counts finalized Leases deleted by hand (left
	// terminating); Finalizes, own Leases whose deletion their holder
	// completed (Ready.Finalize); CollectedTerminating, terminating Leases
	// a peer's garbage collection deleted; FastJoins, processes that
	// became members without the join wait; UncleanScans, join scans that
	// found a finalized Lease outside the ring.
	Finalizers                                    bool
	Terminations, Finalizes, CollectedTerminating int
	FastJoins, UncleanScans                       int
	// CollectEarly: the seed's cores collect expired Leases within it
	// (Options.CollectEarly); Collections counts the Leases a peer's
	// collection deleted.
	CollectEarly bool
	Collections  int
	// Labels counts what the labels model did (Options.Labels).
	Labels LabelStats
}

// Run plays one seed to its end and checks, at every step, that no
// partition is active on two processes at once, that claims are dropped
// only after drain, that no process's claims are voided while it still runs
// anything, and, once the faults stop, that every partition ends up active
// on exactly one live member within the liveness bound.
func Run(seed uint64, opts Options) Result {
	w := newWorld(seed, opts.withDefaults())
	w.run()
	w.checkLabelsSettled()
	r := Result{Seed: seed, Steps: w.steps, Violation: w.violation, Tampers: w.tampers, Pauses: w.pauses,
		Leaves: w.leaves, LeaveTombstones: w.leaveTombstones, KeptPlaces: w.keptPlaces, Returns: w.returns, Proven: w.provenCount(), ForceDeletes: w.kubelet.forceDeletes,
		ClockFaults: w.clockFaults, StaleViews: w.staleViews, Lists: w.lists, SlowLists: w.slowLists, FailedLists: w.failedLists, Handovers: w.handovers,
		CountChanges: w.countChanges, WeightReports: w.weightReports,
		Finalizers: w.p.finalizers, Terminations: w.terminations, Finalizes: w.finalizes, CollectedTerminating: w.collectedTerminating,
		FastJoins: w.fastJoins, UncleanScans: w.uncleanScans, CollectEarly: w.p.gcAfter != 0, Collections: w.collections}
	if w.lab != nil {
		r.Labels = w.lab.stats
	}
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
	KeptPlaces, Returns      int64
	Proven, ForceDeletes     int64
	ClockFaults, StaleViews  int64
	Lists, SlowLists         int64
	Handovers                int64
	FailedLists              int64
	CountChanges             int64
	WeightReports            int64
	// FinalizerSeeds counts the seeds whose fleet writes the member
	// finalizer; FastJoinsWithoutFinalizers, fast joins in the others.
	FinalizerSeeds, Terminations, Finalizes  int64
	CollectedTerminating, FastJoins          int64
	FastJoinsWithoutFinalizers, UncleanScans int64
	// CollectSeeds counts the seeds whose cores collect within the seed;
	// Collections, the Leases a peer's collection deleted.
	CollectSeeds, Collections int64
	// Labels adds up the labels model's counts (Settle: the longest).
	Labels LabelStats
	// Safety counts the violations of a safety invariant (the others are
	// liveness failures: a partition not settled in time).
	Safety int64
	// Failed lists the seeds that broke an invariant, in no order, each
	// with what broke.
	Failed []Failure
	// First is a seed that broke a safety invariant if one did, else one
	// that broke liveness; FirstViolation, what broke.
	First          uint64
	FirstViolation string
	// Elapsed is the wall-clock time of the run.
	Elapsed time.Duration
}

// Failure is a seed that broke an invariant, and what broke.
type Failure struct {
	Seed      uint64
	Violation string
}

// RunSeeds runs the n seeds from first on, on GOMAXPROCS goroutines (each
// seed on one; seeds share nothing), without traces. With
// opts.StopAtSafety it stops at the first safety violation.
func RunSeeds(first uint64, n int, opts Options) Summary {
	opts.Trace = false
	start := time.Now()
	var (
		next atomic.Int64
		stop atomic.Bool
		mu   sync.Mutex
		sum  Summary
		wg   sync.WaitGroup
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for !stop.Load() {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				r := Run(first+uint64(i), opts)
				mu.Lock()
				safety := sum.add(r)
				mu.Unlock()
				if safety && opts.StopAtSafety {
					stop.Store(true)
				}
			}
		})
	}
	wg.Wait()
	sum.Elapsed = time.Since(start)
	return sum
}

// add counts r into s and reports whether r broke a safety invariant.
func (s *Summary) add(r Result) (safety bool) {
	s.Seeds++
	s.Steps += int64(r.Steps)
	s.Tampers += int64(r.Tampers)
	s.Pauses += int64(r.Pauses)
	s.Leaves += int64(r.Leaves)
	s.LeaveTombstones += int64(r.LeaveTombstones)
	s.KeptPlaces += int64(r.KeptPlaces)
	s.Returns += int64(r.Returns)
	s.Proven += int64(r.Proven)
	s.ForceDeletes += int64(r.ForceDeletes)
	s.ClockFaults += int64(r.ClockFaults)
	s.StaleViews += int64(r.StaleViews)
	s.Lists += int64(r.Lists)
	s.SlowLists += int64(r.SlowLists)
	s.Handovers += int64(r.Handovers)
	s.FailedLists += int64(r.FailedLists)
	s.CountChanges += int64(r.CountChanges)
	s.WeightReports += int64(r.WeightReports)
	if r.Finalizers {
		s.FinalizerSeeds++
	} else {
		s.FastJoinsWithoutFinalizers += int64(r.FastJoins)
	}
	s.Terminations += int64(r.Terminations)
	s.Finalizes += int64(r.Finalizes)
	s.CollectedTerminating += int64(r.CollectedTerminating)
	s.FastJoins += int64(r.FastJoins)
	s.UncleanScans += int64(r.UncleanScans)
	s.CollectSeeds += int64(btoi(r.CollectEarly))
	s.Collections += int64(r.Collections)
	s.Labels.add(r.Labels)
	if r.Violation == "" {
		return false
	}
	s.Violations++
	f := Failure{Seed: r.Seed, Violation: r.Violation}
	safety = f.Safety()
	if safety {
		s.Safety++
	}
	s.Failed = append(s.Failed, f)
	if s.FirstViolation == "" || safety && !(Failure{Violation: s.FirstViolation}).Safety() {
		s.First, s.FirstViolation = r.Seed, r.Violation
	}
	return safety
}

// Reporter is the part of testing.TB that ReportFailed uses.
type Reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
}

// CheckFinalizerPaths logs how often the member finalizer's paths ran (fast
// join, terminating Leases, Finalize, collection) and, over 5,000 seeds or
// more, fails when one never did: the simulation would no longer exercise
// it.
func CheckFinalizerPaths(t Reporter, s Summary) {
	t.Helper()
	t.Logf("member finalizer: %d of %d seeds; fast joins %d (%d without finalizers), join scans unclean %d; Leases deleted by hand left terminating %d, deletions completed by their holder (Finalize) %d, by a peer's collection %d",
		s.FinalizerSeeds, s.Seeds, s.FastJoins, s.FastJoinsWithoutFinalizers, s.UncleanScans, s.Terminations, s.Finalizes, s.CollectedTerminating)
	t.Logf("garbage collection within the seed: %d of %d seeds; Leases collected %d", s.CollectSeeds, s.Seeds, s.Collections)
	if s.Seeds < 5000 {
		return
	}
	for _, c := range []struct {
		name string
		n    int64
	}{{"fast join", s.FastJoins}, {"Lease left terminating", s.Terminations}, {"Finalize", s.Finalizes}, {"unclean join scan", s.UncleanScans}, {"garbage collection", s.Collections}} {
		if c.n == 0 {
			t.Errorf("no %s in %d seeds: the simulation does not exercise it", c.name, s.Seeds)
		}
	}
}

// Safety reports whether f broke a safety invariant (else liveness).
func (f Failure) Safety() bool { return !strings.Contains(f.Violation, "liveness:") }

// tracedFailures is how many failing seeds ReportFailed replays with their
// traces: a trace runs to thousands of lines.
const tracedFailures = 3

// ReportFailed reports every failing seed of s with what it broke, safety
// violations first, then in seed order (a long run finds several kinds at
// once), and the replayed traces of the first few; replay is the command that replays one, with %d for the
// seed.
func ReportFailed(t Reporter, s Summary, opts Options, replay string) {
	t.Helper()
	if len(s.Failed) == 0 {
		return
	}
	failed := slices.SortedFunc(slices.Values(s.Failed), func(a, b Failure) int {
		return cmp.Or(-cmp.Compare(btoi(a.Safety()), btoi(b.Safety())), cmp.Compare(a.Seed, b.Seed))
	})
	var list strings.Builder
	for _, f := range failed {
		fmt.Fprintf(&list, "\n  seed %d: %s", f.Seed, f.Violation)
	}
	t.Errorf("%d failing seeds (%d safety):%s\nreplay one: %s", len(failed), s.Safety, list.String(), fmt.Sprintf(replay, failed[0].Seed))
	opts.Trace = true
	for _, f := range failed[:min(len(failed), tracedFailures)] {
		r := Run(f.Seed, opts)
		t.Errorf("seed %d: %s\ntrace:\n%s", f.Seed, r.Violation, r.Trace)
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
	if mutant != "" {
		// Not the product's model: say so rather than report its figures.
		t.Logf("mutant (%s): seed %d steps=%d violated=%v", mutant, seed, r.Steps, r.Violation != "")
	} else {
		t.Logf("simulation: seeds=1 steps=%d violations=%d", r.Steps, btoi(r.Violation != ""))
	}
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
