package shard

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestTimingDefaults(t *testing.T) {
	got := Timing{}.WithDefaults()
	want := Timing{LeaseDuration: 10 * time.Second, RenewDeadline: 6666666666, RenewPeriod: 2 * time.Second, RenewTimeout: 3333333334,
		DrainGracePeriod: 5 * time.Second, GracefulShutdownTimeout: 30 * time.Second, HandoverTimeout: 10 * time.Second}
	if got != want {
		t.Fatalf("defaults %+v, want %+v", got, want)
	}
	// A short RenewDeadline keeps the default period below it.
	if got := (Timing{RenewDeadline: time.Second}).WithDefaults(); got.RenewPeriod != 500*time.Millisecond || got.Validate() != nil {
		t.Fatalf("RenewDeadline 1s: period %v, err %v", got.RenewPeriod, got.Validate())
	}
}

// A leave waits for handovers too: they get a third of the shutdown, at
// most LeaseDuration, so that the drain and the release keep the rest.
func TestTimingHandoverTimeout(t *testing.T) {
	for _, tc := range []struct {
		t    Timing
		want time.Duration
	}{
		{Timing{}, 10 * time.Second},
		{Timing{GracefulShutdownTimeout: DefaultEmbeddedShutdownTimeout}, DefaultEmbeddedShutdownTimeout / 3},
		{Timing{LeaseDuration: 4 * time.Second}, 4 * time.Second},
		{Timing{HandoverTimeout: -1}, -1},
		{Timing{HandoverTimeout: time.Minute}, time.Minute},
	} {
		if got := tc.t.WithDefaults().HandoverTimeout; got != tc.want {
			t.Errorf("%+v: HandoverTimeout %v, want %v", tc.t, got, tc.want)
		}
	}
}

// The one validation of LeaseDuration > RenewDeadline > RenewPeriod, used by
// lease, manager and the binaries.
func TestTimingValidate(t *testing.T) {
	for _, tc := range []struct {
		t    Timing
		want string
	}{
		{Timing{LeaseDuration: -time.Second}, "LeaseDuration (-1s) must be positive"},
		{Timing{RenewDeadline: -time.Second}, "RenewDeadline (-1s) must be positive"},
		{Timing{RenewDeadline: 10 * time.Second}, "RenewDeadline (10s) must be less than LeaseDuration (10s)"},
		{Timing{RenewPeriod: 7 * time.Second}, "RenewPeriod (7s) must be less than RenewDeadline"},
		{Timing{RenewPeriod: -1}, "RenewPeriod (-1ns) must be positive"},
		{Timing{RenewTimeout: 4 * time.Second}, "exceeds LeaseDuration − RenewDeadline"},
		{Timing{RenewTimeout: -1}, "RenewTimeout (-1ns) must be positive"},
		{Timing{DrainGracePeriod: -time.Second}, "DrainGracePeriod (-1s) must not be negative"},
		{Timing{GracefulShutdownTimeout: -time.Second}, "GracefulShutdownTimeout (-1s) must not be negative"},
	} {
		err := tc.t.Validate()
		if !errors.Is(err, ErrTiming) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one containing %q", tc.t, err, tc.want)
		}
	}
	flags := TimingNames{LeaseDuration: "--lease-duration", RenewDeadline: "--renew-deadline", RenewPeriod: "--renew-period", RenewTimeout: "--renew-timeout"}
	err := Timing{LeaseDuration: 5 * time.Second, RenewDeadline: 5 * time.Second}.ValidateNamed(flags)
	if want := "--renew-deadline (5s) must be less than --lease-duration (5s)"; err == nil || !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), "lower --renew-deadline or raise --lease-duration") {
		t.Errorf("named error %v, want one containing %q and naming the flags to change", err, want)
	}
	if err := (Timing{LeaseDuration: time.Second, RenewDeadline: 900 * time.Millisecond, RenewPeriod: 100 * time.Millisecond}).Validate(); err != nil {
		t.Errorf("valid timing rejected: %v", err)
	}
}

// A ring inside another runtime's shutdown (the controller-runtime adapter)
// defaults the shutdown to DefaultEmbeddedShutdownTimeout, and its handover
// timeout follows: the adapter computes neither itself.
func TestTimingEmbeddedDefaults(t *testing.T) {
	for _, tc := range []struct {
		name               string
		t                  Timing
		shutdown, handover time.Duration
	}{
		{"nothing set", Timing{}, DefaultEmbeddedShutdownTimeout, DefaultEmbeddedShutdownTimeout / 3},
		{"shutdown set", Timing{GracefulShutdownTimeout: 9 * time.Second}, 9 * time.Second, 3 * time.Second},
		{"handover set", Timing{HandoverTimeout: time.Second}, DefaultEmbeddedShutdownTimeout, time.Second},
		{"long shutdown: handover at most LeaseDuration", Timing{GracefulShutdownTimeout: time.Minute}, time.Minute, DefaultLeaseDuration},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.t.WithEmbeddedDefaults()
			if got.GracefulShutdownTimeout != tc.shutdown || got.HandoverTimeout != tc.handover {
				t.Fatalf("shutdown %v handover %v; want %v and %v", got.GracefulShutdownTimeout, got.HandoverTimeout, tc.shutdown, tc.handover)
			}
			if got.WithDefaults() != got {
				t.Fatalf("WithEmbeddedDefaults left a field for WithDefaults: %+v", got)
			}
		})
	}
}
