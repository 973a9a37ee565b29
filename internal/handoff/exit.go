//go:build !mutant_noexit

package handoff

import "time"

// stopOverdue reports whether the stop deadline stopBy has come at now:
// what ran at a fence and still runs must not outlive it, since peers may
// void the claims LeaseDuration after the last renew, so the process exits
// (Ready.Exit). exit_mutant.go, built only with the tag mutant_noexit,
// never asks it to, to show that the simulation catches it.
func stopOverdue(now, stopBy time.Time) bool {
	return !now.Before(stopBy)
}
