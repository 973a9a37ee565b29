//go:build !mutant_skipdrain

package handoff

import "github.com/kshard/kshard/shard"

// claimOf is the claim to publish: the target, and, drain before release,
// every partition still active or draining, so that no peer activates a
// partition this replica may still run. drain_mutant.go, built only with
// the tag mutant_skipdrain, drops the draining ones at once, to show that
// the simulation catches a core that releases before its drain ends.
func claimOf(target, active, draining shard.PartitionSet) shard.PartitionSet {
	return target.Union(draining).Union(active)
}
