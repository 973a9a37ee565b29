package controller

import (
	"github.com/kshard/kshard/shard"

	"context"
	"errors"
	"time"
)

// ErrLeaseExpired is the error a manager's clients return (wrapped; test it
// with errors.Is) for a write issued under a reconcile whose lease validity
// has passed or was broken by a fence since the reconcile started. The write
// was not sent.
var ErrLeaseExpired = errors.New("the replica's lease validity has passed (renewals failed, the process was paused, or its Lease was taken from it); the write was not sent")

// LeaseValidity returns the replica's current lease validity: until when
// its lease is known valid, and the epoch that validity belongs to. The
// type is package shard's, decided by the handoff core, so that the rule
// the simulations check (when an epoch begins, what "never held" means) is
// the one workers and the client transport read.
type LeaseValidity func() shard.Validity

// validityKey carries a reconcile's validity source and its epoch at start.
type validityKey struct{}

type carried struct {
	current LeaseValidity
	epoch   uint64
}

// WithLeaseValidity returns a copy of ctx whose writes are valid while
// current reports the epoch it reports now and its Until has not passed
// (see LeaseValid). Workers set it on every reconcile context; use it for
// work started outside a reconcile that must stop writing at the same
// moment.
func WithLeaseValidity(ctx context.Context, current LeaseValidity) context.Context {
	return context.WithValue(ctx, validityKey{}, carried{current: current, epoch: current().Epoch})
}

// ValidUntil returns until when writes issued under ctx may be sent: the
// lease's current Until while the epoch the context started in lasts, the
// zero time once a fence ended it. ok is false for a context that carries
// no validity (work not started by a sharded worker, such as the manager's
// own Lease renewals).
//
// A client transport must compare it with the clock itself rather than rely
// on ctx.Err(): after a pause (SIGSTOP, a frozen VM, a long stop-the-world)
// the goroutine that would cancel the context may not have run yet when the
// reconcile resumes and sends its write.
func ValidUntil(ctx context.Context) (until time.Time, ok bool) {
	c, ok := ctx.Value(validityKey{}).(carried)
	if !ok {
		return time.Time{}, false
	}
	v := c.current()
	if v.Epoch != c.epoch {
		return time.Time{}, true
	}
	return v.Until, true
}

// LeaseValid reports whether a write issued under ctx may still be sent at
// now: true for a context that carries no validity, otherwise now must be
// strictly before ValidUntil(ctx).
func LeaseValid(ctx context.Context, now time.Time) bool {
	until, ok := ValidUntil(ctx)
	return !ok || now.Before(until)
}
