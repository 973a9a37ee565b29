package handoff

import "time"

// Validity is until when this replica's lease is known valid, and the
// epoch that validity belongs to. Workers check it before each reconcile,
// and the client transport before each write of one (shard/ring
// publishes it as controller.Validity): the core decides it, so that the
// simulations check the rule the shells carry out.
type Validity struct {
	// Until is the sending time of the last successful renewal plus
	// RenewDeadline: the moment the core fences unless a later renewal
	// succeeds. Zero before the first renewal, and while the replica is
	// fenced or done.
	Until time.Time
	// Epoch counts the breaks in the validity: a fence, or a renewal sent
	// only after the previous validity had passed (the process was paused
	// or cut off in between, so a peer may have voided the Lease), starts
	// a new epoch. Renewals within an epoch extend Until without a gap, so
	// work started in an epoch may go on writing as long as the epoch
	// lasts and Until has not passed; work of an earlier epoch may not,
	// even once the lease is valid again.
	Epoch uint64
}

// validityState is the validity as of the last step, with the inputs it
// was computed from, which the next step compares against.
type validityState struct {
	Validity
	sent time.Time // the sending time of the renewal Until counts from; zero: none yet
	lost bool      // fenced or done
}

// nextValidity is the validity after a step that saw the last successful
// renewal sent at sent (zero: none yet) and the replica lost (fenced or
// done), given the previous step's.
func nextValidity(prev validityState, sent time.Time, lost bool, renewDeadline time.Duration) validityState {
	next := validityState{Validity: Validity{Epoch: prev.Epoch}, sent: sent, lost: lost}
	lapsed := !prev.sent.IsZero() && !sent.Before(prev.sent.Add(renewDeadline))
	// A fence before any validity starts no epoch: the zero Validity must
	// keep meaning "never valid" (Validity.EverHeld), which lets
	// the client transport pass the writes of a replica still starting.
	if lost && !prev.lost && prev.EverHeld() || lapsed {
		next.Epoch++
	}
	if !lost && !sent.IsZero() {
		next.Until = sent.Add(renewDeadline)
	}
	return next
}

// ValidAt reports whether the lease is valid at now.
func (v Validity) ValidAt(now time.Time) bool { return now.Before(v.Until) }

// EverHeld reports whether the replica has held a lease validity since it
// started, though it may have passed or been ended by a fence since: Until
// is set, or a fence or a lapse has begun an epoch. The zero Validity is a
// replica that has not been valid yet (starting, or not renewed yet), which
// is why a fence before any validity starts no epoch (nextValidity).
func (v Validity) EverHeld() bool { return !v.Until.IsZero() || v.Epoch > 0 }
