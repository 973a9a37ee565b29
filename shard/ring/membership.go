package ring

import (
	"context"
	"time"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/internal/membership"
)

// memberLeases is what the ring coordinator needs of the ring's Leases: a
// view of them, the own Lease's renewals and writes, and the reads and
// deletes the handoff core asks for. *membership.Member implements it, and so
// does the deterministic simulation's process (internal/handoffsim). It
// names internal types, so it is unexported: a runtime passes the Replica
// NewReplica built, and this package's tests set Options.leases.
type memberLeases interface {
	// Listed reports that Snapshot holds the ring (the first list is done),
	// Synced that the own Lease is held as well.
	Listed() bool
	Synced() bool
	// Snapshot returns the ring's Leases in the view; Departed, the Leases
	// that left it, in their last state (membership.Member.Departed).
	Snapshot() []membership.Observed
	Departed() []membership.Observed
	// Changes signals (coalesced) that Snapshot, LastRenew or Synced may
	// have changed.
	Changes() <-chan struct{}
	// LastRenew returns when the last write of the own Lease that counts
	// as a renewal was sent (local clock).
	LastRenew() (sentAt time.Time, ok bool)
	// SetDesired sets the Record the own Lease publishes from now on.
	SetDesired(handoff.Record)
	// TakeOver allows overwriting the own Lease at version once
	// (handoff.Ready.TakeOver).
	TakeOver(version string)
	// ReadPeer reads the latest state of ref.Identity's Lease directly (a
	// quorum read), for the core to judge against ref.Version
	// (handoff.Core.Confirmed); a Lease outside the ring reads as not
	// found.
	ReadPeer(ctx context.Context, ref handoff.LeaseRef) (handoff.LeaseRead, error)
	// DeletePeer deletes identity's Lease if it still has version.
	DeletePeer(ctx context.Context, identity, version string) error
	// Delete stops writing the own Lease and deletes it (graceful leave).
	Delete(ctx context.Context) error
	// JoinScanClean reports that, after the first list, a list of every
	// Lease of the namespace found none carrying the member finalizer
	// outside the ring, and that Snapshot holds every ring Lease it
	// listed (handoff.Core.JoinScanClean: the replica may skip its join
	// wait).
	JoinScanClean() bool
	// Finalize removes the member finalizer from the own Lease, which
	// someone else is deleting, if it still has version
	// (handoff.Ready.Finalize); the deletion then completes, and the own
	// Lease is created afresh.
	Finalize(ctx context.Context, version string) error
}

// Member is what a runtime uses of a replica's Lease membership
// (Replica.Member): running the own Lease, its incarnation and the cache
// status it publishes. The coordinator reads and writes the same Leases
// through the Replica passed to New.
type Member interface {
	// Run creates and renews the own Lease and watches the ring's until
	// ctx ends or the member leaves.
	Run(ctx context.Context) error
	// Incarnation is this process's incarnation, published on its Lease.
	Incarnation() string
	// SetCacheStatus publishes the cache's mode and object count on the
	// own Lease.
	SetCacheStatus(mode string, objects int)
}

var (
	_ Member       = (*membership.Member)(nil)
	_ memberLeases = (*membership.Member)(nil)
)
