package controller

import (
	"context"
	"errors"
	"time"
)

// ErrLeaseExpired is the cause of a reconcile context that ended because
// the replica's lease validity passed, and the error a manager's clients
// return for a write issued under such a context (wrapped; test it with
// errors.Is). The write was not sent.
var ErrLeaseExpired = errors.New("the replica's lease validity has passed (renewals failed or the process was paused); the write was not sent")

// LeaseValidity returns until when this replica's lease is known valid: the
// time the last successful renewal was sent plus RenewDeadline, on the
// monotonic clock (a time.Time taken from time.Now and moved by Add keeps
// its monotonic reading, so wall-clock steps do not move it). A zero time
// means no validity (not renewed yet).
type LeaseValidity func() time.Time

// validUntilKey carries a reconcile's validity in its context.
type validUntilKey struct{}

// WithValidUntil returns a copy of ctx that carries until as the lease
// validity writes issued under it must respect (see ValidUntil). Workers set
// it on every reconcile context; use it for work started outside a
// reconcile that must stop writing at the same moment.
func WithValidUntil(ctx context.Context, until time.Time) context.Context {
	return context.WithValue(ctx, validUntilKey{}, until)
}

// ValidUntil returns the lease validity carried by ctx: the moment after
// which nothing done under ctx may leave the process. ok is false for a
// context that carries none (work not started by a sharded worker, such as
// the manager's own Lease renewals).
//
// A client transport must compare it with the clock itself rather than rely
// on ctx.Err(): after a pause (SIGSTOP, a frozen VM, a long stop-the-world)
// the goroutine that would cancel the context on its deadline may not have
// run yet when the reconcile resumes and sends its write.
func ValidUntil(ctx context.Context) (until time.Time, ok bool) {
	until, ok = ctx.Value(validUntilKey{}).(time.Time)
	return until, ok
}

// LeaseValid reports whether a write issued under ctx may still be sent at
// now: true for a context that carries no validity, otherwise now must be
// strictly before it.
func LeaseValid(ctx context.Context, now time.Time) bool {
	until, ok := ValidUntil(ctx)
	return !ok || now.Before(until)
}
