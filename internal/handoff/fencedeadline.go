//go:build !mutant_fencelate

package handoff

import "time"

// fenceAfter is how long after the sending of its last successful renew
// the replica fences: RenewDeadline, which leaves the rest of LeaseDuration
// as the margin for its reconciles to stop (StopDeadline), for clock rates
// that differ and for a write in flight. fencedeadline_mutant.go, built
// only with the tag mutant_fencelate, fences at LeaseDuration, to show
// that the simulation catches it.
func fenceAfter(t Timing) time.Duration {
	return t.RenewDeadline
}
