//go:build mutant_leavingreleased

package handoff

// The mutant core that activates before the release is seen (built only
// with the tag mutant_leavingreleased; release.go is the product's): a
// peer whose Lease shows state leaving counts as having released its
// claim, although it publishes its empty claim only once its drain ends.
// Defence removed: every Lease's claim counts, whatever its state, until
// an empty claim is observed.
func inForce(p *peer) bool {
	return !p.void && !p.obs.Claim.IsEmpty() && p.obs.State != StateLeaving
}

// mutantName and mutantBug name this build's broken core and the bug it
// models, for TestMutant (mutants_test.go), which only a build with one
// mutant's tag compiles.
const (
	mutantName = "leavingreleased"
	mutantBug  = "a peer's Lease in state leaving counts as released before its empty claim is seen"
)
