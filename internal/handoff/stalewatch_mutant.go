//go:build mutant_trustwatchorder

package handoff

// The mutant core without the defence against stale views (stalewatch.go):
// built only with the tag mutant_trustwatchorder, by the tests that show the
// simulation's stale-view fault breaks the invariant without it
// (TestSimulationFindsStaleViewsWithoutDefence and the coordinator's).
const trustWatchOrder = true
