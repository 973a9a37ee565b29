//go:build mutant_reuseepoch

package handoff

// The mutant core that reuses an epoch (built only with the tag
// mutant_reuseepoch; epoch.go is the product's): after a fence, a Record
// written before it still proves the claim of the partitions it held, so
// the replica activates them again on that old read-back, although peers
// may have voided that very Record while it was fenced and run those
// partitions since. Defence removed: a fence starts a new epoch, and only
// a Record of the new epoch counts.
func (l *claimLedger) rearm() {}

// mutantName and mutantBug name this build's broken core and the bug it
// models, for TestMutant (mutants_test.go), which only a build with one
// mutant's tag compiles.
const (
	mutantName = "reuseepoch"
	mutantBug  = "after a fence, a Record of the earlier epoch still counts as the claim read back"
)
