package handoff

import (
	"errors"
	"fmt"
	"time"

	"github.com/kshard/kshard/shard"
)

// gcFactor: Leases unchanged for gcFactor×LeaseDuration are deleted.
const gcFactor = 10

// Config holds what a Core needs to know about its replica and its ring.
type Config struct {
	// Identity is the replica identity (the pod name). Required.
	Identity string

	// Incarnation is a random id unique to this process. Required: it is how
	// the core tells its own writes from those of an earlier process with the
	// same identity.
	Incarnation string

	// Ring is the ring's configuration; all members must use the same one.
	// Zero fields take shard's defaults.
	Ring shard.Config

	// Timing holds the lease timings the core decides by (LeaseDuration,
	// RenewDeadline and what derives from them, HandoverTimeout); it must
	// match the Lease member's. Zero fields take Timing's defaults.
	Timing

	// GarbageCollectAfter is how long a peer's Lease must stay unchanged
	// before the core asks to delete it. Defaults to 10×LeaseDuration.
	GarbageCollectAfter time.Duration

	// PartitionCache: the replica caches only the objects of the partitions
	// it needs (a sharded cache). Every Ready then names them in Hold, and
	// a partition activates only once PartitionsSynced has reported it:
	// synced before act, beside claim before act, so that an activation's
	// replay sees every object of the partition. Off (the default), the
	// cache is full and CachesSynced covers every partition. Not part of
	// the fingerprint: peers may differ in it safely.
	PartitionCache bool

	// KeepPlaceOnLeave: a graceful leave of an active replica keeps its
	// place in the ring for the next process of its identity (a
	// StatefulSet's rolling update restarts pod name-k as name-k). Its
	// Record says so (Record.Returning): peers keep placing its partitions
	// on it, so none of them lists or runs those partitions meanwhile, and
	// they wait unreconciled until the next incarnation activates them, or,
	// if none comes (a scale-down), until the Lease expires, LeaseDuration
	// after the leaver's last write; then they move as after any leave. A
	// restart then moves nothing, where it otherwise moves the leaver's
	// share to its peers and back (with a sharded cache, each peer's cache
	// grows by its part of that share while the leaver is away). Off (the
	// default), a leave hands its partitions over at once. Not part of the
	// fingerprint: peers may differ in it safely, and a peer that does not
	// know Record.Returning moves the partitions as before.
	KeepPlaceOnLeave bool
}

// WithDefaults returns c with every zero field replaced by its default.
func (c Config) WithDefaults() Config {
	c.Ring = c.Ring.WithDefaults()
	c.Timing = c.Timing.WithDefaults()
	if c.GarbageCollectAfter == 0 {
		c.GarbageCollectAfter = gcFactor * c.LeaseDuration
	}
	return c
}

// Validate reports the first field of c (after defaults) that cannot work.
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.Identity == "":
		return errors.New("handoff: Config.Identity is empty; set it to the replica identity (pod name)")
	case c.Incarnation == "":
		return errors.New("handoff: Config.Incarnation is empty; set it to a random id per process")
	case c.GarbageCollectAfter < c.LeaseDuration:
		return fmt.Errorf("handoff: Config.GarbageCollectAfter=%v must be at least LeaseDuration=%v", c.GarbageCollectAfter, c.LeaseDuration)
	}
	if err := c.Timing.Validate(); err != nil {
		return fmt.Errorf("handoff: Config: %w", err)
	}
	if err := c.Ring.Validate(); err != nil {
		return fmt.Errorf("handoff: %w", err)
	}
	return nil
}

// Errors that Core.Err wraps; test with errors.Is.
var (
	// ErrDuplicateIdentity: another process wrote this replica's Lease after
	// this one had taken it. This process has stopped; make identities unique
	// (or let the replaced process exit).
	ErrDuplicateIdentity = errors.New("another process with the same identity took over this replica's Lease")

	// ErrIdentityInUse: the Lease of this identity carries another
	// incarnation and is not expired; the core waits for it to expire.
	ErrIdentityInUse = errors.New("the Lease of this identity is held by another live incarnation")

	// ErrForeignFingerprint: a live member runs with another ring
	// configuration; this replica refuses to join while such a member is
	// active, and the foreign claims block all partitions.
	ErrForeignFingerprint = errors.New("a live member runs with a different ring configuration")

	// ErrRing: the ring of the observed members could not be built.
	ErrRing = errors.New("ring cannot be built")
)
