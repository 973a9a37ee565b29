package handoff

import (
	"errors"
	"fmt"
	"time"
)

// DefaultLeaseDuration is how long a peer's Lease must stay unchanged, in
// this replica's observed time, before its claims may be voided. It is the
// one default every package (lease, manager, the binaries) uses.
const DefaultLeaseDuration = 10 * time.Second

// Timing holds the lease timings of a replica. Every package that accepts
// them (lease.Options, manager.Options, Config) defaults and validates them
// here, so the rule LeaseDuration > RenewDeadline > RenewPeriod lives in one
// place.
type Timing struct {
	// LeaseDuration: how long a Lease must stay unchanged, in a peer's
	// observed time, before its holder looks expired. Defaults to
	// DefaultLeaseDuration.
	LeaseDuration time.Duration
	// RenewDeadline: how long after the sending of its last successful renew
	// a replica fences itself. Defaults to 2/3 of LeaseDuration.
	RenewDeadline time.Duration
	// RenewPeriod: the interval between renews at steady state. Defaults to
	// LeaseDuration/5 (2s), at most RenewDeadline/2.
	RenewPeriod time.Duration
	// RenewTimeout: the client-side timeout of a renew; a renew answered
	// later does not count. Defaults to, and may not exceed, LeaseDuration −
	// RenewDeadline, so that a renew sent before a fence lands, if at all,
	// before any peer may void the Lease.
	RenewTimeout time.Duration
}

// WithDefaults returns t with every zero field replaced by its default.
func (t Timing) WithDefaults() Timing {
	if t.LeaseDuration == 0 {
		t.LeaseDuration = DefaultLeaseDuration
	}
	if t.RenewDeadline == 0 {
		t.RenewDeadline = t.LeaseDuration * 2 / 3
	}
	if t.RenewPeriod == 0 {
		t.RenewPeriod = min(t.LeaseDuration/5, t.RenewDeadline/2)
	}
	if t.RenewTimeout == 0 {
		t.RenewTimeout = t.LeaseDuration - t.RenewDeadline
	}
	return t
}

// ErrTiming is wrapped by every error Timing.Validate returns.
var ErrTiming = errors.New("invalid lease timing")

// Validate reports the first rule that t (after defaults) breaks, naming the
// fields by their option names.
func (t Timing) Validate() error {
	t = t.WithDefaults()
	switch {
	case t.LeaseDuration <= 0:
		return fmt.Errorf("%w: LeaseDuration %s must be positive (0 selects the default %s)", ErrTiming, t.LeaseDuration, DefaultLeaseDuration)
	case t.RenewDeadline <= 0:
		return fmt.Errorf("%w: RenewDeadline %s must be positive (0 selects 2/3 of LeaseDuration)", ErrTiming, t.RenewDeadline)
	case t.RenewDeadline >= t.LeaseDuration:
		return fmt.Errorf("%w: RenewDeadline %s must be shorter than LeaseDuration %s: a replica must stop its reconciles before peers may judge its Lease expired; lower RenewDeadline or raise LeaseDuration",
			ErrTiming, t.RenewDeadline, t.LeaseDuration)
	case t.RenewPeriod <= 0:
		return fmt.Errorf("%w: RenewPeriod %s must be positive (0 selects LeaseDuration/5)", ErrTiming, t.RenewPeriod)
	case t.RenewPeriod >= t.RenewDeadline:
		return fmt.Errorf("%w: RenewPeriod %s must be shorter than RenewDeadline %s, or one slow renew fences the replica; lower RenewPeriod",
			ErrTiming, t.RenewPeriod, t.RenewDeadline)
	case t.RenewTimeout <= 0:
		return fmt.Errorf("%w: RenewTimeout %s must be positive (0 selects LeaseDuration − RenewDeadline)", ErrTiming, t.RenewTimeout)
	case t.RenewTimeout > t.LeaseDuration-t.RenewDeadline:
		return fmt.Errorf("%w: RenewTimeout %s exceeds LeaseDuration − RenewDeadline = %s: a renew landing that late could outlive peers' expiry judgement; lower RenewTimeout or RenewDeadline",
			ErrTiming, t.RenewTimeout, t.LeaseDuration-t.RenewDeadline)
	}
	return nil
}

// StopDeadline is how long after the sending of its last successful renew a
// fenced replica may still have reconciles running: the core asks the process
// to exit (Ready.Exit) when any is still running then. It is halfway between
// RenewDeadline and LeaseDuration, which leaves the other half for clock-rate
// drift and for the process to die.
func (t Timing) StopDeadline() time.Duration {
	t = t.WithDefaults()
	return t.RenewDeadline + (t.LeaseDuration-t.RenewDeadline)/2
}
