//go:build mutant_skipdrain

package handoff

import "github.com/kshard/kshard/shard"

// The mutant core that skips the drain (built only with the tag
// mutant_skipdrain; drain.go is the product's): a revoked partition leaves
// the published claim at once, while its reconciles still run out their
// grace period. Defence removed: drain before release.
func claimOf(target, active, draining shard.PartitionSet) shard.PartitionSet {
	return target.Union(active)
}

// mutantName and mutantBug name this build's broken core and the bug it
// models, for TestMutant (mutants_test.go), which only a build with one
// mutant's tag compiles.
const (
	mutantName = "skipdrain"
	mutantBug  = "a revoked partition leaves the published claim at once, while its reconciles still drain"
)
