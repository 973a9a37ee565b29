//go:build mutant_notombstone

package handoff

// The mutant core that ignores tombstones (built only with the tag
// mutant_notombstone; tombstone.go is the product's): a peer's Lease that
// left the view, deleted or relabelled by a third party while its holder
// runs, stops blocking its claim at once. Defence removed: absence is not
// death.
func blockMain(p *peer, b *blockers) {
	if p.gone {
		return
	}
	b.add(p)
}

// mutantName and mutantBug name this build's broken core and the bug it
// models, for TestMutant (mutants_test.go), which only a build with one
// mutant's tag compiles.
const (
	mutantName = "notombstone"
	mutantBug  = "a peer's Lease that left the view (deleted or relabelled by hand) stops blocking its claim at once"
)
