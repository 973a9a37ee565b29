package kshardtest

import (
	"context"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kshard/kshard/internal/recorder"
)

// Report is what Env.Check found in the records: OK says whether the run
// passed, String lists every finding (each overlap, lost update, late
// update and existing object read as NotFound, with the records that show
// it), and the fields give the figures a test may assert on or log.
type Report struct {
	// Reconciles is how many reconciles were recorded, Completed how many
	// of them finished their work, and Writes how many updates the kit's
	// writer had acknowledged.
	Reconciles, Completed, Writes int
	// Overlaps counts a key reconciled by two processes at once (or twice
	// at once by one) and a partition active in two processes at once.
	Overlaps int
	// Lost counts the updates never reconciled at their generation (or a
	// later one); Late those reconciled later than the liveness bound
	// (Options.LivenessBound, extended by the faults they overlapped).
	Lost, Late int
	// NotFound counts the reconciles that read an existing object from
	// their cache as NotFound (Recorder.NotFound).
	NotFound int
	// LongestWait is the longest an update waited for its reconcile, and
	// LongestNetWait the longest less the faults that extended its
	// allowance: the figure the liveness bound is compared with.
	LongestWait, LongestNetWait time.Duration

	r recorder.Report
}

// newReport summarises the checker's report r.
func newReport(r recorder.Report) Report {
	return Report{
		Reconciles:     r.Intervals,
		Completed:      r.Completed,
		Writes:         r.Writes,
		Overlaps:       len(r.Overlaps) + len(r.SelfOverlaps) + len(r.PartitionOverlaps),
		Lost:           len(r.Lost),
		Late:           len(r.Liveness.Overdue),
		NotFound:       len(r.Vanished),
		LongestWait:    r.Liveness.Worst,
		LongestNetWait: r.Liveness.WorstNet,
		r:              r,
	}
}

// OK is false on any overlap, lost or late update, or existing object read
// as NotFound.
func (r Report) OK() bool { return r.r.OK() }

// String is the checker's full report: the figures, then every finding.
func (r Report) String() string { return r.r.String() }

// Check waits up to timeout until every update the writer made has been
// reconciled (no lost update is left in the records), then returns the
// checker's report over everything recorded: the same checker as kshard's
// chaos suite, with Options.LivenessBound as the bound every update must
// have been reconciled within. It fails the test only when the records
// cannot be read; the caller asserts on the report:
//
//	if r := env.Check(time.Minute); !r.OK() { t.Fatal(r) }
//
// Stop the writer first, so that the set of updates is final.
//
// A process frozen by Pause records nothing while frozen, so its reconciles
// and active windows span its peers' takeover though it ran nothing then:
// the overlaps involving it are left out of the report (and counted in the
// test log), as kshard's chaos suite does; what such a process must not do
// is send a write after resuming before it re-validated its Lease, which
// kshard's fencing transport refuses.
func (e *Env) Check(timeout time.Duration) Report {
	e.t.Helper()
	var r recorder.Report
	var readErr error
	// A timeout is no error here: the report then lists what is lost.
	_ = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		r, readErr = recorder.CheckWithin(e.RecordDir(), e.opts.LivenessBound)
		return readErr != nil || len(r.Lost) == 0, nil
	})
	if readErr != nil {
		e.t.Fatalf("reading the records: %v", readErr)
	}
	e.dropFrozen(&r)
	return newReport(r)
}

// dropFrozen removes the overlaps involving a process frozen by Pause.
func (e *Env) dropFrozen(r *recorder.Report) {
	e.mu.Lock()
	frozen := maps.Clone(e.frozen)
	e.mu.Unlock()
	if len(frozen) == 0 {
		return
	}
	before := len(r.Overlaps) + len(r.PartitionOverlaps)
	r.Overlaps = slices.DeleteFunc(r.Overlaps, func(o recorder.Overlap) bool { return frozen[o.A.Process] || frozen[o.B.Process] })
	r.PartitionOverlaps = slices.DeleteFunc(r.PartitionOverlaps, func(o recorder.PartitionOverlap) bool {
		return frozen[o.A.Process] || frozen[o.B.Process]
	})
	e.t.Logf("kshardtest: %d reconcile and window overlaps involve a process frozen by Pause and are left out", before-len(r.Overlaps)-len(r.PartitionOverlaps))
}
