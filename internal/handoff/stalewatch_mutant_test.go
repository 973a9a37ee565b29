//go:build mutant_trustwatchorder

package handoff_test

import (
	"testing"
	"time"

	"github.com/kshard/kshard/internal/handoffsim"
)

// Built with the tag mutant_trustwatchorder, the core trusts the watch's
// order (stalewatch_mutant.go): every other test of the package would then
// judge the mutant, not the product, which is why the tag is for this test
// alone (make unit runs it so):
//
//	go test -tags mutant_trustwatchorder -run FindsStaleViews ./internal/handoff/ ./shard/ring/

// TestSimulationFindsStaleViewsWithoutDefence shows the stale-view fault is
// real: with the core's defence off it finds a violation.
func TestSimulationFindsStaleViewsWithoutDefence(t *testing.T) {
	opts := handoffsim.Options{ClockSkewPPM: -1, StopAtSafety: true}
	r := handoffsim.RunSeeds(0, 4000, opts)
	t.Logf("stale views, defence off (mutant): seeds=%d steps=%d violations=%d (safety %d), %d stale views, in %v; first: seed %d: %s",
		r.Seeds, r.Steps, r.Violations, r.Safety, r.StaleViews, r.Elapsed.Round(time.Millisecond), r.First, r.FirstViolation)
	if r.Safety == 0 {
		t.Fatal("no safety violation with stale views and the defence off: the stale-view fault does not reach the core")
	}
}
