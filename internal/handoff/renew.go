package handoff

import "time"

// WriteStatus is how one write of the own Lease ended, as the shell saw it:
// what the API server answered, or that it did not answer.
type WriteStatus int

const (
	// WriteOK: the API server answered success; the Lease holds the write.
	WriteOK WriteStatus = iota
	// WriteConflict: an update's precondition failed (409 Conflict): the
	// Lease changed since the version the write was conditioned on.
	WriteConflict
	// WriteExists: a create found the Lease there already (409
	// AlreadyExists).
	WriteExists
	// WriteGone: an update found no Lease (404 NotFound): someone deleted
	// it.
	WriteGone
	// WriteForbidden: RBAC refused the write (403).
	WriteForbidden
	// WriteTimeout: no answer within the client timeout. The write may
	// still land, before the timeout has passed on the server's side.
	WriteTimeout
	// WriteFailed: any other error (unreachable, 5xx, throttled).
	WriteFailed
)

// WriteResult is what the shell reports of one write of the own Lease.
type WriteResult struct {
	Status WriteStatus
	// SentAt is the local time the write was sent; AnsweredAt, when its
	// answer arrived.
	SentAt, AnsweredAt time.Time
	// Sent is the Record the write carried.
	Sent Record
}

// WriteVerdict is what a write means; JudgeWrite decides it. At most one of
// ReadOwn, Recreate, Retry and Fatal is set, and none with Landed.
type WriteVerdict struct {
	// Landed: the Lease holds Sent now; condition the next write on the
	// version the answer carries.
	Landed bool
	// Renewed: the write counts as a renewal sent at SentAt
	// (Core.RenewSucceeded). Only a write answered within the client
	// timeout counts.
	Renewed bool
	// ReadOwn: the Lease changed under the write: read it directly and let
	// JudgeOwnRead say whether to write over it. Never retry blindly.
	ReadOwn bool
	// Recreate: the Lease is gone: create it afresh. If this incarnation
	// held it, the core has fenced (it sees its Lease gone) and counts only
	// renews sent after that.
	Recreate bool
	// Retry: a transient failure; write again after a backoff.
	Retry bool
	// Fatal: the shell cannot write the Lease at all (RBAC); stop and say
	// so.
	Fatal bool
}

// JudgeWrite decides what one write of the own Lease means, given the
// client timeout (at most LeaseDuration − RenewDeadline). A write counts as
// a renewal, from the time it was sent, only if it was answered within that
// timeout: the timeout is what guarantees that a write sent before a fence
// lands, if at all, before any peer may void the Lease, so an answer later
// than that is treated like no answer, although the Lease holds the write.
func JudgeWrite(timeout time.Duration, r WriteResult) WriteVerdict {
	switch r.Status {
	case WriteOK:
		return WriteVerdict{Landed: true, Renewed: r.AnsweredAt.Sub(r.SentAt) <= timeout}
	case WriteConflict, WriteExists:
		return WriteVerdict{ReadOwn: true}
	case WriteGone:
		return WriteVerdict{Recreate: true}
	case WriteForbidden:
		return WriteVerdict{Fatal: true}
	default:
		return WriteVerdict{Retry: true}
	}
}

// OwnRead is what a direct read of the own Lease found after a write
// conflicted (WriteVerdict.ReadOwn).
type OwnRead struct {
	// Found is false when the Lease does not exist.
	Found bool
	// Incarnation is the incarnation written in it, Version its
	// resourceVersion.
	Incarnation, Version string
}

// OwnReadVerdict says what to do with the own Lease as read.
type OwnReadVerdict int

const (
	// OwnAdopt: write over the version read: this incarnation wrote it (a
	// write whose answer was lost landed, or a third party changed only
	// labels), or the core allowed taking that version over
	// (Ready.TakeOver).
	OwnAdopt OwnReadVerdict = iota
	// OwnCreate: the Lease is gone; create it afresh.
	OwnCreate
	// OwnNotOurs: another writer holds it; stop writing and let the core,
	// which sees it through the watch, decide (a takeover or a duplicate
	// identity).
	OwnNotOurs
)

// JudgeOwnRead decides whether this incarnation may write over the own
// Lease it read; takeOver is the version the core last named in
// Ready.TakeOver ("" for none).
func JudgeOwnRead(incarnation, takeOver string, r OwnRead) OwnReadVerdict {
	switch {
	case !r.Found:
		return OwnCreate
	case r.Incarnation == incarnation && incarnation != "":
		return OwnAdopt
	case r.Version != "" && r.Version == takeOver:
		return OwnAdopt
	default:
		return OwnNotOurs
	}
}

// OwnLease is a read of this identity's Lease at start, before the
// incarnation has written it (membership.Member's acquire).
type OwnLease struct {
	OwnRead
	// Ring is the Lease's ring label ("" for none); Holder its
	// spec.holderIdentity.
	Ring, Holder string
}

// AcquireVerdict says what a starting incarnation does with its identity's
// Lease as read.
type AcquireVerdict int

const (
	// AcquireCreate: the Lease does not exist; create it.
	AcquireCreate AcquireVerdict = iota
	// AcquireAdopt: this incarnation wrote it (a create or takeover whose
	// answer was lost landed); carry on from the version read.
	AcquireAdopt
	// AcquireTakeOver: another incarnation's version, which the core
	// allowed taking over (Ready.TakeOver): write over exactly it.
	AcquireTakeOver
	// AcquireWait: another incarnation holds it; wait until the core,
	// which sees it through the watch, allows a takeover (it has expired
	// or its holder's death is proven) or stops this one (a duplicate
	// identity).
	AcquireWait
	// AcquireRestoreLabel: this identity's member Lease with its ring label
	// removed by a third party: put the label back and change nothing
	// else, so that the ring sees the claims it carries and the core waits
	// its writer out before anything moves.
	AcquireRestoreLabel
	// AcquireNameTaken: a Lease that is no member Lease of this identity
	// holds the name: another ring or tool uses it; stop with an error
	// naming the collision.
	AcquireNameTaken
)

// JudgeAcquire decides what incarnation, starting as identity in ring, does
// with the Lease read under its name; takeOver is the version the core last
// named in Ready.TakeOver ("" for none). A Lease outside ring counts as
// this identity's when it names identity as holder, as every member Lease
// does, even with its incarnation edited away (the core then treats it as
// damaged and waits its writer out); one with another holder is a foreign
// object, never written over.
func JudgeAcquire(ring, identity, incarnation, takeOver string, r OwnLease) AcquireVerdict {
	switch {
	case !r.Found:
		return AcquireCreate
	case r.Ring != ring && r.Holder != identity:
		return AcquireNameTaken
	case r.Ring != ring:
		return AcquireRestoreLabel
	}
	switch JudgeOwnRead(incarnation, takeOver, r.OwnRead) {
	case OwnAdopt:
		if r.Incarnation == incarnation {
			return AcquireAdopt
		}
		return AcquireTakeOver
	default:
		return AcquireWait
	}
}
