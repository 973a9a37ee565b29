package shard

import (
	"errors"
	"fmt"
	"time"
)

// The defaults of Timing. They live here and nowhere else: every runtime
// of a ring (kshard's manager, the controller-runtime adapter, the
// binaries) defaults its options through Timing.WithDefaults.
const (
	// DefaultLeaseDuration is how long a peer's Lease must stay unchanged,
	// in this replica's observed time, before its claims may be voided.
	DefaultLeaseDuration = 10 * time.Second
	// DefaultDrainGracePeriod is how long the reconciles of a partition
	// that moves away may run before their contexts are cancelled.
	DefaultDrainGracePeriod = 5 * time.Second
	// DefaultGracefulShutdownTimeout bounds the leave of a replica that
	// owns its process's shutdown (kshard's manager).
	DefaultGracefulShutdownTimeout = 30 * time.Second
	// DefaultEmbeddedShutdownTimeout bounds the leave of a ring run inside
	// another runtime's shutdown: two thirds of the 30 s controller-runtime's
	// manager gives its runnables by default, so that the ring has left
	// and its controllers have stopped before the manager gives up on them.
	DefaultEmbeddedShutdownTimeout = 20 * time.Second
)

// Timing holds the timings of a replica. Every options struct that accepts
// them (the Lease membership's options, manager.Options, the adapter's crshard.Options,
// Config, which embeds it) defaults and validates them here, so the rules
// LeaseDuration > RenewDeadline > RenewPeriod and the defaults derived from
// one another live in one place.
type Timing struct {
	// LeaseDuration: how long a Lease must stay unchanged, in a peer's
	// observed time, before its holder looks expired. Defaults to
	// DefaultLeaseDuration.
	LeaseDuration time.Duration
	// RenewDeadline: how long after the sending of its last successful renew
	// a replica fences itself. Defaults to 2/3 of LeaseDuration.
	RenewDeadline time.Duration
	// RenewPeriod: the interval between renews at steady state. Defaults to
	// LeaseDuration/5, at most RenewDeadline/2 (2s with the defaults).
	RenewPeriod time.Duration
	// RenewTimeout: the client-side timeout of a renew; a renew answered
	// later does not count. Defaults to, and may not exceed, LeaseDuration −
	// RenewDeadline, so that a renew sent before a fence lands, if at all,
	// before any peer may void the Lease.
	RenewTimeout time.Duration
	// DrainGracePeriod: how long the reconciles of a partition that moves
	// away may run before their contexts are cancelled (a fence cancels at
	// once). Defaults to DefaultDrainGracePeriod.
	DrainGracePeriod time.Duration
	// GracefulShutdownTimeout bounds a graceful leave: draining, handing
	// over, publishing an empty claim and deleting the Lease. Defaults to
	// DefaultGracefulShutdownTimeout (DefaultEmbeddedShutdownTimeout for a
	// ring inside another runtime's shutdown: WithEmbeddedDefaults).
	GracefulShutdownTimeout time.Duration
	// HandoverTimeout bounds how long a partition leaving this replica's
	// target stays active here while its new owner's sharded cache lists
	// its objects (make before break; see Record.Warm). A leave waits for
	// it too, so it defaults to a third of GracefulShutdownTimeout, leaving
	// the rest for the drain and the release, at most LeaseDuration;
	// negative turns the wait off (break before make).
	HandoverTimeout time.Duration
}

// WithDefaults returns t with every zero field replaced by its default: the
// one function that applies them.
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
	if t.DrainGracePeriod == 0 {
		t.DrainGracePeriod = DefaultDrainGracePeriod
	}
	if t.GracefulShutdownTimeout == 0 {
		t.GracefulShutdownTimeout = DefaultGracefulShutdownTimeout
	}
	if t.HandoverTimeout == 0 {
		t.HandoverTimeout = min(t.LeaseDuration, t.GracefulShutdownTimeout/3)
	}
	return t
}

// WithEmbeddedDefaults is WithDefaults for a ring that runs inside another
// runtime's shutdown (the controller-runtime adapter):
// GracefulShutdownTimeout defaults to DefaultEmbeddedShutdownTimeout, and
// what derives from it (HandoverTimeout) follows.
func (t Timing) WithEmbeddedDefaults() Timing {
	if t.GracefulShutdownTimeout == 0 {
		t.GracefulShutdownTimeout = DefaultEmbeddedShutdownTimeout
	}
	return t.WithDefaults()
}

// ErrTiming is wrapped by every error Timing.Validate returns.
var ErrTiming = errors.New("invalid lease timing")

// TimingNames are the names Timing.ValidateNamed gives the timings in its
// errors: option names, or a program's flags.
type TimingNames struct {
	LeaseDuration, RenewDeadline, RenewPeriod, RenewTimeout string
	DrainGracePeriod, GracefulShutdownTimeout               string
}

// fieldNames names the timings as Timing's (and the options structs')
// fields.
var fieldNames = TimingNames{LeaseDuration: "LeaseDuration", RenewDeadline: "RenewDeadline", RenewPeriod: "RenewPeriod", RenewTimeout: "RenewTimeout",
	DrainGracePeriod: "DrainGracePeriod", GracefulShutdownTimeout: "GracefulShutdownTimeout"}

// Validate reports the first rule that t (after defaults) breaks, naming the
// fields by their option names.
func (t Timing) Validate() error { return t.ValidateNamed(fieldNames) }

// ValidateNamed is Validate with the timings called by n in the error: the
// one check of the rule LeaseDuration > RenewDeadline > RenewPeriod and of
// the durations that must not be negative, also for programs that expose
// the timings as flags.
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
	case t.DrainGracePeriod < 0:
		return fmt.Errorf("%w: %s (%s) must not be negative (0 selects %s)", ErrTiming, n.DrainGracePeriod, t.DrainGracePeriod, DefaultDrainGracePeriod)
	case t.GracefulShutdownTimeout < 0:
		return fmt.Errorf("%w: %s (%s) must not be negative (0 selects the default)", ErrTiming, n.GracefulShutdownTimeout, t.GracefulShutdownTimeout)
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
