package handoff

import (
	"time"

	"github.com/kshard/kshard/shard"
)

// Renewal and fencing. Only the sending time of a renew that succeeded
// counts: the write may have waited in the network, but it cannot have
// landed before it was sent. The replica may reconcile only while its last
// such renew was sent within RenewDeadline; past it, it fences (revokes
// everything at once), and what was running then must have stopped by
// StopDeadline after that renew, halfway to LeaseDuration, when peers may
// start to void its claims, or the process must exit.

// fencing tracks the renewals of the own Lease and the fence they call
// for.
type fencing struct {
	renewDeadline, stopDeadline time.Duration

	renewed  bool      // some renew has succeeded
	lastSent time.Time // when the latest renew that succeeded was sent
	// lapsed: a renew succeeded that was sent only after RenewDeadline had
	// passed since the previous one (the process was paused or cut off in
	// between). Peers may have voided the claims during the gap, so the
	// replica fences in the next step even if that renew makes it look
	// recently renewed there.
	lapsed bool
	fenced bool
	// mustStop: the partitions running at a fence and not drained yet;
	// stopBy, when it must be empty.
	mustStop shard.PartitionSet
	stopBy   time.Time
}

func newFencing(cfg Config) fencing {
	return fencing{renewDeadline: fenceAfter(cfg.Timing), stopDeadline: cfg.StopDeadline(),
		mustStop: shard.NewPartitionSet(cfg.Ring.Partitions)}
}

// succeeded records a renew sent at sentAt that has succeeded.
func (f *fencing) succeeded(sentAt time.Time) {
	// Not clamped to the core's time here: that is the time of the
	// previous input and may be long past. clamp does it at the next step.
	if !f.renewed || sentAt.After(f.lastSent) {
		if f.renewed && !f.fenced && lapse(f.lastSent, sentAt, f.renewDeadline) {
			f.lapsed = true
		}
		f.renewed, f.lastSent = true, sentAt
	}
}

// clamp keeps the last renew from the future: a send time later than now
// would stretch the deadline.
func (f *fencing) clamp(now time.Time) {
	if f.lastSent.After(now) {
		f.lastSent = now
	}
}

// recent reports whether the own Lease is known to have been renewed
// within RenewDeadline, the precondition for reconciling anything.
func (f *fencing) recent(now time.Time) bool {
	return f.renewed && now.Sub(f.lastSent) < f.renewDeadline
}

// lift ends a fence once a renew succeeds in time again, and, if the own
// Lease was lost (lost, at lostAt), only once it is whole again and a
// renew sent after the loss has succeeded.
func (f *fencing) lift(now time.Time, lost bool, lostAt time.Time) {
	if f.fenced && f.recent(now) && !lost && f.lastSent.After(lostAt) {
		f.fenced = false
	}
}

// due reports whether the replica must fence now: it is not fenced, and
// its own Lease is lost, a renew came after a lapse, or its renew deadline
// has passed. A lapse counts once.
func (f *fencing) due(now time.Time, lost bool) bool {
	due := !f.fenced && (lost || f.lapsed || f.renewed && !f.recent(now))
	f.lapsed = false
	return due
}

// start fences the replica at now with running (every partition active or
// draining) still to stop: by StopDeadline after the last renew that
// succeeded (after now if none has), or by an earlier stop deadline still
// pending.
func (f *fencing) start(now time.Time, running shard.PartitionSet) {
	f.fenced = true
	stopBy := f.lastSent.Add(f.stopDeadline)
	if !f.renewed {
		stopBy = now.Add(f.stopDeadline)
	}
	if f.mustStop.IsEmpty() || stopBy.Before(f.stopBy) {
		f.stopBy = stopBy
	}
	f.mustStop = f.mustStop.Union(running)
}

// overdue reports whether something that was running at a fence and is
// still draining has outlived the stop deadline: the process must exit.
// The stop deadline holds even if renews have succeeded again since: a
// peer may have voided the claims before the Lease changed.
func (f *fencing) overdue(now time.Time, draining shard.PartitionSet) bool {
	f.mustStop = f.mustStop.Intersect(draining)
	return !f.mustStop.IsEmpty() && stopOverdue(now, f.stopBy)
}

// nextDeadline considers the renew deadline and the stop deadline.
func (f *fencing) nextDeadline(consider func(time.Time)) {
	if f.renewed && !f.fenced {
		consider(f.lastSent.Add(f.renewDeadline))
	}
	if !f.mustStop.IsEmpty() {
		consider(f.stopBy)
	}
}
