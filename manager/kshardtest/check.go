package kshardtest

import (
	"context"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kshard/kshard/manager/kshardtest/recorder"
)

// Check waits up to timeout until every update the writer made has been
// reconciled (no lost update is left in the records), then returns the
// checker's report over everything recorded: the same checker as kshard's
// chaos suite (recorder.Log.CheckWithin), with Options.LivenessBound as
// the bound every update must have been reconciled within. It fails the
// test only when the records cannot be read; the caller asserts on the
// report:
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
func (e *Env) Check(timeout time.Duration) recorder.Report {
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
	return r
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

// Log loads everything recorded so far, for checks of a test's own.
func (e *Env) Log() (*recorder.Log, error) { return recorder.Load(e.RecordDir()) }
