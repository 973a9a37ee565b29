package handoff

import (
	"slices"

	"github.com/kshard/kshard/shard"
)

// Ready holds what the shell must do after a decision step. Carry out every
// field before feeding the core inputs that depend on it; the order below is
// the order to apply them in.
type Ready struct {
	// Exit: reconciles that were running when this replica fenced itself
	// are still running at the stop deadline (Config.StopDeadline after the
	// last successful renew was sent). Peers may void this replica's claims
	// soon, so the process must exit now. The core is done.
	Exit bool

	// Fence: this replica has not renewed in time. Cancel every reconcile
	// now, with no grace period: Revoke lists every partition that was
	// active or still draining (a drain under way must give up the rest of
	// its grace period). Report them with Drained as they stop. The core
	// rejoins on its own once renews succeed again.
	Fence bool

	// Revoke: stop admitting these partitions, cancel their reconciles after
	// the grace period, and call Drained once none of them is in flight. Their
	// claims stay published until then.
	Revoke shard.PartitionSet

	// TakeOver: the own Lease at this version was written by someone else
	// (an earlier incarnation whose Lease was confirmed expired, or a
	// third party that damaged it); the shell may overwrite that version
	// once, with an update conditioned on it. Without it the shell never
	// overwrites a version this incarnation did not write (it creates the
	// Lease when it is absent). Repeated until the own incarnation is
	// observed in the Lease.
	TakeOver *LeaseRef

	// Publish is the Record to write to the own Lease, nil if it has not
	// changed since the last Publish. Keep renewing with the latest Record.
	Publish *Record

	// Activate: these partitions may be reconciled from now on. Replay the
	// cached objects that fall into them, since their previous owner may have
	// dropped events.
	Activate shard.PartitionSet

	// Confirm: read each Lease directly (a quorum GET, not the cache) and
	// report with Confirmed, or with ConfirmFailed when the read fails.
	Confirm []LeaseRef

	// GarbageCollect: delete each Lease with its Version as precondition, so
	// that a Lease renewed in the meantime survives. Failures may be ignored.
	GarbageCollect []LeaseRef

	// ProveDeath: Leases whose holders may have ended (a peer silent for
	// RenewDeadline/2, or the own identity's previous incarnation). For
	// each, read the pod named Identity and, if its UID is PodUID and it
	// reports a terminated container (state or lastState) whose
	// termination message names Incarnation, report Terminated. A pod that
	// is gone or has another UID proves nothing. Recomputed in every Ready;
	// the shell limits how often it reads each pod.
	ProveDeath []Death

	// Hold (Config.PartitionCache only): the partitions whose objects the
	// cache must list and watch: those claimed, which are the target (so a
	// gained partition is listed while its old owner drains), the active
	// and the draining ones. Given in full in every Ready; pass it on when
	// it changed, and report what the cache has synced with
	// PartitionsSynced. Objects of other partitions may leave the cache.
	Hold shard.PartitionSet

	// Finalize: the own Lease at Version is being deleted by someone else
	// (it is Terminating), this replica has fenced, and nothing it ran is
	// in flight any more: remove the member finalizer with an update
	// conditioned on Version so that the deletion completes, then create
	// the Lease afresh as after any deletion. Asked for in every Ready
	// while it holds; a failed update needs nothing but the next Ready.
	Finalize *LeaseRef

	// DeleteLease: the graceful leave is complete; stop renewing, delete the
	// own Lease if this process has written it (precondition: the version it
	// wrote last), and exit. The core is done.
	DeleteLease bool
}

// IsEmpty reports whether r asks for nothing.
func (r Ready) IsEmpty() bool {
	return !r.Exit && !r.Fence && r.Revoke.IsEmpty() && r.TakeOver == nil && r.Publish == nil && r.Activate.IsEmpty() &&
		len(r.Confirm) == 0 && len(r.GarbageCollect) == 0 && len(r.ProveDeath) == 0 && r.Finalize == nil && !r.DeleteLease
}

// unacked is what Ready asked for and Advance has not acknowledged yet:
// Ready asks for it again, so that a Ready the shell dropped or failed to
// apply is not lost (raft's Ready/Advance). A Publish is tracked by the
// claim ledger (acked).
type unacked struct {
	activate, revoke         shard.PartitionSet
	confirm                  []LeaseRef
	fence, exit, deleteLease bool
}

func newUnacked(partitions int) unacked {
	return unacked{activate: shard.NewPartitionSet(partitions), revoke: shard.NewPartitionSet(partitions)}
}

// merge adds what r asks for to what is unacknowledged and makes r ask for
// all of it that still holds: activations of partitions still active,
// revocations of partitions still draining, and confirms still awaited
// (awaited: the Lease waits for the answer about that version).
func (u *unacked) merge(r *Ready, active, draining shard.PartitionSet, awaited func(LeaseRef) bool) {
	u.activate = u.activate.Union(r.Activate).Intersect(active)
	u.revoke = u.revoke.Union(r.Revoke).Intersect(draining)
	u.fence = u.fence || r.Fence
	u.exit = u.exit || r.Exit
	u.deleteLease = u.deleteLease || r.DeleteLease
	pending := append(u.confirm, r.Confirm...)
	u.confirm = u.confirm[:0:0]
	for _, ref := range pending {
		if awaited(ref) && !slices.Contains(u.confirm, ref) {
			u.confirm = append(u.confirm, ref)
		}
	}
	r.Confirm = slices.Clone(u.confirm)
	r.Activate = u.activate.Clone()
	r.Revoke = u.revoke.Clone()
	r.Fence, r.Exit, r.DeleteLease = u.fence, u.exit, u.deleteLease
}

// ack removes what rd carried out.
func (u *unacked) ack(rd Ready) {
	u.activate = u.activate.Difference(rd.Activate)
	u.revoke = u.revoke.Difference(rd.Revoke)
	u.confirm = slices.DeleteFunc(u.confirm, func(ref LeaseRef) bool { return slices.Contains(rd.Confirm, ref) })
	u.fence = u.fence && !rd.Fence
	u.exit = u.exit && !rd.Exit
	u.deleteLease = u.deleteLease && !rd.DeleteLease
}
