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

// TimingNames are the names Timing.ValidateNamed gives the four timings in
// its errors: option names, or a program's flags.
type TimingNames struct {
	LeaseDuration, RenewDeadline, RenewPeriod, RenewTimeout string
}

// FieldNames names the timings as Timing's (and the options structs')
// fields.
var FieldNames = TimingNames{LeaseDuration: "LeaseDuration", RenewDeadline: "RenewDeadline", RenewPeriod: "RenewPeriod", RenewTimeout: "RenewTimeout"}

// Validate reports the first rule that t (after defaults) breaks, naming the
// fields by their option names.
func (t Timing) Validate() error { return t.ValidateNamed(FieldNames) }

// ValidateNamed is Validate with the timings called by n in the error: the
// one check of the rule LeaseDuration > RenewDeadline > RenewPeriod, also
// for programs that expose the timings as flags.
func (t Timing) ValidateNamed(n TimingNames) error {
	t = t.WithDefaults()
	switch {
	case t.LeaseDuration <= 0:
		return fmt.Errorf("%w: %s (%s) must be positive", ErrTiming, n.LeaseDuration, t.LeaseDuration)
	case t.RenewDeadline <= 0:
		return fmt.Errorf("%w: %s (%s) must be positive (0 selects 2/3 of %s)", ErrTiming, n.RenewDeadline, t.RenewDeadline, n.LeaseDuration)
	case t.RenewDeadline >= t.LeaseDuration:
		return fmt.Errorf("%w: %s (%s) must be less than %s (%s): a replica must stop its reconciles before peers may judge its Lease expired; lower %s or raise %s",
			ErrTiming, n.RenewDeadline, t.RenewDeadline, n.LeaseDuration, t.LeaseDuration, n.RenewDeadline, n.LeaseDuration)
	case t.RenewPeriod <= 0:
		return fmt.Errorf("%w: %s (%s) must be positive (0 selects %s/5)", ErrTiming, n.RenewPeriod, t.RenewPeriod, n.LeaseDuration)
	case t.RenewPeriod >= t.RenewDeadline:
		return fmt.Errorf("%w: %s (%s) must be less than %s (%s), or one slow renew fences the replica; lower %s",
			ErrTiming, n.RenewPeriod, t.RenewPeriod, n.RenewDeadline, t.RenewDeadline, n.RenewPeriod)
	case t.RenewTimeout <= 0:
		return fmt.Errorf("%w: %s (%s) must be positive (0 selects %s − %s)", ErrTiming, n.RenewTimeout, t.RenewTimeout, n.LeaseDuration, n.RenewDeadline)
	case t.RenewTimeout > t.LeaseDuration-t.RenewDeadline:
		return fmt.Errorf("%w: %s (%s) exceeds %s − %s = %s: a renew landing that late could outlive peers' expiry judgement; lower %s or %s",
			ErrTiming, n.RenewTimeout, t.RenewTimeout, n.LeaseDuration, n.RenewDeadline, t.LeaseDuration-t.RenewDeadline, n.RenewTimeout, n.RenewDeadline)
	}
	return nil
}

// StopDeadline is how long after the sending of its last successful renew a
// fenced replica may still have reconciles running: the core asks the process
// to exit (Ready.Exit) when any is still running then. It is halfway between
// RenewDeadline and LeaseDuration, which leaves the other half for clock-rate
// drift and for the process to die: with the default timing, clocks whose
// rates are each within ±(LD−SD)/(LD+SD) = 1/11 ≈ 9 % of true (see the
// package doc's assumptions).
func (t Timing) StopDeadline() time.Duration {
	t = t.WithDefaults()
	return t.RenewDeadline + (t.LeaseDuration-t.RenewDeadline)/2
}
