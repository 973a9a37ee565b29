package shard

import "time"

// Validity is until when this replica's lease is known valid, and the
// epoch that validity belongs to. Workers check it before each reconcile,
// and the client transport before each write of one (shard/ring's
// Coordinator.LeaseValidity publishes it; controller.LeaseValidity reads
// it): the handoff core decides it, so that the simulations check the rule
// the shells carry out.
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

// ValidAt reports whether the lease is valid at now.
func (v Validity) ValidAt(now time.Time) bool { return now.Before(v.Until) }

// EverHeld reports whether the replica has held a lease validity since it
// started, though it may have passed or been ended by a fence since: Until
// is set, or a fence or a lapse has begun an epoch. The zero Validity is a
// replica that has not been valid yet (starting, or not renewed yet), which
// is why a fence before any validity starts no epoch (nextValidity).
func (v Validity) EverHeld() bool { return !v.Until.IsZero() || v.Epoch > 0 }
