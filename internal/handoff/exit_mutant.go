//go:build mutant_noexit

package handoff

import "time"

// The mutant core that never exits (built only with the tag mutant_noexit;
// exit.go is the product's): a fenced replica whose reconciles ignore
// cancellation lets them run on past the stop deadline, into the time when
// peers void its claims and run its partitions. Defence removed: exit at
// the stop deadline.
func stopOverdue(now, stopBy time.Time) bool {
	return false
}

// mutantName and mutantBug name this build's broken core and the bug it
// models, for TestMutant (mutants_test.go), which only a build with one
// mutant's tag compiles.
const (
	mutantName = "noexit"
	mutantBug  = "a fenced replica never exits: reconciles that ignore cancellation run past the stop deadline"
)
