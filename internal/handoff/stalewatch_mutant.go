//go:build mutant_trustwatchorder

package handoff

// The mutant core without the defence against stale views (stalewatch.go):
// built only with the tag mutant_trustwatchorder, by the tests that show the
// simulation's stale-view fault breaks the invariant without it
// (TestSimulationFindsStaleViewsWithoutDefence and the coordinator's).
const trustWatchOrder = true

// mutantName and mutantBug name this build's broken core and the bug it
// models, for TestMutant (mutants_test.go), which only a build with one
// mutant's tag compiles.
const (
	mutantName = "trustwatchorder"
	mutantBug  = "trusts the watch to deliver a peer's Lease states in order: a stale view that shows a claim dropped, added back since, frees the partition"
)
