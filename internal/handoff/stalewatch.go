//go:build !mutant_trustwatchorder

package handoff

// trustWatchOrder, when true, turns off the defence against stale views of
// a peer's Lease (staleObservation). It is a constant, false in every build
// but the mutant of stalewatch_mutant.go, which the simulation's tests build
// with the tag mutant_trustwatchorder to show that their stale-view fault
// breaks the invariant without the defence; no shipped binary can turn the
// defence off.
const trustWatchOrder = false
