//go:build mutant_fencelate

package handoff

import "time"

// The mutant core without a lease validity margin (built only with the tag
// mutant_fencelate; fencedeadline.go is the product's): a replica that
// cannot renew keeps reconciling until LeaseDuration after its last renew
// was sent, the very time a peer with the same clock rate may void its
// claims, so a slower clock, a renew that landed late or a reconcile still
// stopping overlaps the peer's. Defence removed: fence at RenewDeadline.
func fenceAfter(t Timing) time.Duration {
	return t.LeaseDuration
}

// mutantName and mutantBug name this build's broken core and the bug it
// models, for TestMutant (mutants_test.go), which only a build with one
// mutant's tag compiles.
const (
	mutantName = "fencelate"
	mutantBug  = "fences at LeaseDuration after the last renew instead of RenewDeadline: no validity margin"
)
