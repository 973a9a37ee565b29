package gate

import (
	"context"
	"fmt"
	"time"
)

// DefaultDrainReportAfter is how long a drain waits before it is reported
// overdue when DrainOptions.ReportAfter is zero.
const DefaultDrainReportAfter = 30 * time.Second

// DrainOptions configure Drain.
type DrainOptions struct {
	// Grace is how long the reconciles in flight may run before Cancel is
	// called; zero calls it at once (a fence).
	Grace time.Duration
	// Cancel cancels the contexts of the reconciles in flight of the
	// drained partitions that are still revoked. It may be called after
	// Drain returned an error: the partitions stay draining, and their
	// reconciles still get cancelled. Required.
	Cancel func()
	// ReportAfter is how long Drain waits before it calls Overdue, and
	// then again every ReportAfter. Defaults to DefaultDrainReportAfter.
	ReportAfter time.Duration
	// Overdue is told, each time ReportAfter passes with reconciles still
	// in flight, how many there are and how long the drain has waited;
	// first is true the first time. Drain keeps waiting: a partition is
	// never released while a reconcile of it runs. Nil: not told.
	Overdue func(inFlight int, waited time.Duration, first bool)
}

// Drain revokes parts and returns nil once none of their reconciles is in
// flight, cancelling them when the grace period has passed: the drain of
// rule 2 of the handoff protocol (drain before release). Once Drain has
// revoked a partition its count can only fall, so a zero it observes is
// final unless the partition is activated again, which fails the drain.
// When ctx ends first Drain returns an error wrapping its cause; the
// partitions stay revoked and draining.
func (g *Gate) Drain(ctx context.Context, parts []int, o DrainOptions) error {
	for _, p := range parts {
		g.Revoke(p)
	}
	if g.inFlightOf(parts) == 0 {
		return nil
	}
	if o.ReportAfter <= 0 {
		o.ReportAfter = DefaultDrainReportAfter
	}
	start := time.Now()
	var grace *time.Timer
	if o.Grace <= 0 {
		o.Cancel()
	} else {
		// Not stopped when ctx ends first: the partitions stay draining
		// and their reconciles still get cancelled.
		grace = time.AfterFunc(o.Grace, o.Cancel)
	}
	stopGrace := func() {
		if grace != nil {
			grace.Stop()
		}
	}
	report := time.NewTimer(o.ReportAfter)
	defer report.Stop()
	reported := false
	for {
		changed := g.changes() // before the checks, so no wake-up is missed
		for _, p := range parts {
			if g.Active(p) {
				stopGrace()
				return fmt.Errorf("partition %d was activated again while draining; its drain did not complete", p)
			}
		}
		n := g.inFlightOf(parts)
		if n == 0 {
			stopGrace()
			return nil
		}
		select {
		case <-changed:
		case <-report.C:
			if o.Overdue != nil {
				o.Overdue(n, time.Since(start), !reported)
			}
			reported = true
			report.Reset(o.ReportAfter)
		case <-ctx.Done():
			return fmt.Errorf("%d reconciles of the revoked partitions are still in flight; the partitions stay revoked and draining: %w", n, context.Cause(ctx))
		}
	}
}

// inFlightOf is the number of reconciles of parts in flight.
func (g *Gate) inFlightOf(parts []int) int {
	n := 0
	for _, p := range parts {
		n += g.inFlight(p)
	}
	return n
}
