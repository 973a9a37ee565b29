//go:build !mutant_forgetprior

package handoff

import "time"

// waitedOut reports whether the previous incarnation's Lease (prior) has
// stayed unchanged for LeaseDuration of this core's time, so that its
// expiry is worth confirming: that process may still run what it claims
// (a replacement started while its predecessor, cut off, runs on), and it
// fences only RenewDeadline after its last renew. takeover_mutant.go,
// built only with the tag mutant_forgetprior, does not wait, to show that
// the simulation catches it.
func (o *ownLease) waitedOut(now time.Time, prior *peer) bool {
	return !prior.liveAt(now, o.lease)
}
