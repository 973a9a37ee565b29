package handoff

import "time"

// The rules every reader of a ring's Leases shares with the core: which
// Lease counts as a ring member, when a Lease looks expired, and what a
// direct read of a Lease that looked expired says about its holder. The
// core, the kshard CLI (release) and shard/ringstatus call these, so
// that no tool judges a Lease by rules of its own.

// Expired reports whether a Lease that has shown one version for silent,
// on the judge's own clock, looks expired after leaseDuration. The core
// counts silent from when it first observed that version, never from
// timestamps written by others; a tool that has only renewTime to go by
// counts from it and says so.
func Expired(silent, leaseDuration time.Duration) bool { return silent >= leaseDuration }

// RingMember reports whether l, a Lease its reader judges live, makes its
// holder a member of the ring whose configuration has the given
// fingerprint: a well-formed Lease, not being deleted, written with that
// configuration, in state active, or in state leaving or joining and
// keeping its place for the identity's next incarnation (Record.Returning).
// Members place the ring; every other live Lease only blocks the partitions
// it claims.
func RingMember(l Observed, fingerprint string) bool {
	placed := l.State == StateActive || l.Returning && (l.State == StateLeaving || l.State == StateJoining)
	return l.Problem == "" && !l.ClaimUnknown && !l.Terminating && placed && l.Fingerprint == fingerprint
}

// leftForReturn reports whether l is the Lease an incarnation left for its
// identity's next one (Config.KeepPlaceOnLeave): well-formed, in state
// leaving, keeping its place, and claiming nothing. Its writer ran nothing
// when it wrote that version (drain before release) and, leaving, never
// claims again, so the next incarnation takes it over at once, without
// waiting it out: a takeover conditioned on that version either lands
// before any later write of it or fails.
func leftForReturn(l Observed) bool {
	return l.Problem == "" && !l.ClaimUnknown && !l.Terminating && l.Incarnation != "" &&
		l.State == StateLeaving && l.Returning && l.Claim.IsEmpty()
}

// LeaseRead is a direct read (a quorum GET, not the cache) of a Lease.
type LeaseRead struct {
	// Found is false when no Lease of the name exists.
	Found bool
	// UID and Version are the object's UID and resourceVersion; UID may be
	// "" when the reader does not tell objects apart.
	UID, Version string
}

// ConfirmVerdict is what a direct read says about the holder of a Lease
// that looked expired; JudgeConfirm decides it.
type ConfirmVerdict int

const (
	// ConfirmSilent: the Lease still shows the version that looked
	// expired: its holder wrote nothing while it was watched, so its
	// claims may be voided (a tool may release the Lease, conditioned on
	// that version).
	ConfirmSilent ConfirmVerdict = iota
	// ConfirmGone: no Lease of the name exists any more. Absence is not
	// death: a Lease seen in the view until now may have been deleted by
	// hand under a live holder, and the core keeps its claim as a
	// tombstone for another LeaseDuration.
	ConfirmGone
	// ConfirmAlive: the Lease changed since (another version, or another
	// object of the name): its holder, or a successor, is alive. Judge
	// again only after another LeaseDuration of silence.
	ConfirmAlive
)

// JudgeConfirm decides what read, a direct read of a Lease that looked
// expired at version (of the object with uid, "" if unknown), says about
// its holder. Confirm before void: a lagging watch, or a cache, must never
// make a healthy holder look dead, so only the version judged, read back
// directly, lets its claims go.
func JudgeConfirm(uid, version string, read LeaseRead) ConfirmVerdict {
	switch {
	case !read.Found:
		return ConfirmGone
	case uid != "" && read.UID != "" && uid != read.UID:
		return ConfirmAlive
	case read.Version == version:
		return ConfirmSilent
	default:
		return ConfirmAlive
	}
}
