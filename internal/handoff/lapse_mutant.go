//go:build mutant_renewlapse

package handoff

import "time"

// The mutant core that renews after its deadline (built only with the tag
// mutant_renewlapse; lapse.go is the product's): a renew sent after the
// renew deadline of the previous one had passed counts like any other, so
// a replica resumed from a pause, whose renew succeeds before its next
// step, carries on with its partitions without fencing, although peers may
// have voided its claims meanwhile. Defence removed: a lapsed renewal
// fences the replica and starts a new epoch.
func lapse(prev, sent time.Time, renewDeadline time.Duration) bool {
	return false
}

// mutantName and mutantBug name this build's broken core and the bug it
// models, for TestMutant (mutants_test.go), which only a build with one
// mutant's tag compiles.
const (
	mutantName = "renewlapse"
	mutantBug  = "a renew sent after the renew deadline had passed revives the replica without a fence"
)
