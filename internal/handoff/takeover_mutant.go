//go:build mutant_forgetprior

package handoff

import "time"

// The mutant core that forgets its identity's claims on restart (built
// only with the tag mutant_forgetprior; takeover.go is the product's): a
// new incarnation asks at once to confirm the previous incarnation's Lease
// and takes it over as soon as the read shows the version it saw, without
// waiting it out, although that process may still run its partitions
// until it fences. Defence removed: the previous incarnation's Lease is
// waited out like a peer's (LeaseDuration unchanged, then confirmed).
func (o *ownLease) waitedOut(now time.Time, prior *peer) bool {
	return true
}

// mutantName and mutantBug name this build's broken core and the bug it
// models, for TestMutant (mutants_test.go), which only a build with one
// mutant's tag compiles.
const (
	mutantName = "forgetprior"
	mutantBug  = "a new incarnation takes its identity's Lease over without waiting the previous incarnation out"
)
