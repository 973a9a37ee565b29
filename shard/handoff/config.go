package handoff

import (
	"errors"
	"fmt"
	"time"

	"github.com/kshard/kshard/shard"
)

const (
	// DefaultLeaseDuration is how long a peer's Lease must stay unchanged, in
	// this replica's observed time, before its claims may be voided.
	DefaultLeaseDuration = 10 * time.Second

	// gcFactor: Leases unchanged for gcFactor×LeaseDuration are deleted.
	gcFactor = 10
)

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

	// LeaseDuration is how long a Lease must stay unchanged, in locally
	// observed time, before its holder looks expired. Defaults to
	// DefaultLeaseDuration.
	LeaseDuration time.Duration

	// RenewDeadline is how long after the sending of the last renew that
	// succeeded this replica fences itself. It must be shorter than
	// LeaseDuration; the difference is the margin in which reconciles are
	// stopped. Defaults to 2/3 of LeaseDuration.
	RenewDeadline time.Duration

	// GarbageCollectAfter is how long a peer's Lease must stay unchanged
	// before the core asks to delete it. Defaults to 10×LeaseDuration.
	GarbageCollectAfter time.Duration
}

// WithDefaults returns c with every zero field replaced by its default.
func (c Config) WithDefaults() Config {
	c.Ring = c.Ring.WithDefaults()
	if c.LeaseDuration == 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	if c.RenewDeadline == 0 {
		c.RenewDeadline = c.LeaseDuration * 2 / 3
	}
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
	case c.LeaseDuration <= 0:
		return fmt.Errorf("handoff: Config.LeaseDuration=%v must be positive", c.LeaseDuration)
	case c.RenewDeadline <= 0 || c.RenewDeadline >= c.LeaseDuration:
		return fmt.Errorf("handoff: Config.RenewDeadline=%v must be in (0, LeaseDuration=%v): the difference is the time a fenced replica has to stop its reconciles", c.RenewDeadline, c.LeaseDuration)
	case c.GarbageCollectAfter < c.LeaseDuration:
		return fmt.Errorf("handoff: Config.GarbageCollectAfter=%v must be at least LeaseDuration=%v", c.GarbageCollectAfter, c.LeaseDuration)
	}
	if err := c.Ring.Validate(); err != nil {
		return fmt.Errorf("handoff: %w", err)
	}
	return nil
}

// StopDeadline is how long after the sending of its last successful renew a
// fenced replica may still have reconciles running: the core asks the process
// to exit (Ready.Exit) when any is still running then. It is halfway between
// RenewDeadline and LeaseDuration, which leaves the other half for clock-rate
// drift and for the process to die.
func (c Config) StopDeadline() time.Duration {
	c = c.WithDefaults()
	return c.RenewDeadline + (c.LeaseDuration-c.RenewDeadline)/2
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
