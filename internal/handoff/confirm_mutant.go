//go:build mutant_voidunconfirmed

package handoff

// The mutant core that judges a peer dead on its own view alone (built
// only with the tag mutant_voidunconfirmed; confirm.go is the product's):
// a Lease that has looked unchanged for LeaseDuration is voided at once,
// without the direct read, so a holder that renews behind a lagging or
// stalled watch loses its partitions while it runs them. Defence removed:
// confirm before void.
func (p *peer) suspect(id string, r *Ready) {
	p.void = true
}

// mutantName and mutantBug name this build's broken core and the bug it
// models, for TestMutant (mutants_test.go), which only a build with one
// mutant's tag compiles.
const (
	mutantName = "voidunconfirmed"
	mutantBug  = "voids a peer's Lease that looks expired without the direct read that confirms it"
)
