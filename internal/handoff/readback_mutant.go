//go:build mutant_noreadback

package handoff

// The mutant core that acts before its claim is seen (built only with the
// tag mutant_noreadback; readback.go is the product's): a partition
// activates as soon as the core has decided to claim it, before its own
// Lease shows the claim, so a peer with another view of the ring may not
// see the claim and activate the same partition. Defence removed: claim
// before act (read-your-write of the claim).
func readBackOf(at uint64, own *Observed, p int) bool {
	return at != 0
}

// mutantName and mutantBug name this build's broken core and the bug it
// models, for TestMutant (mutants_test.go), which only a build with one
// mutant's tag compiles.
const (
	mutantName = "noreadback"
	mutantBug  = "activates a partition once it decides to claim it, before its own Lease shows the claim"
)
