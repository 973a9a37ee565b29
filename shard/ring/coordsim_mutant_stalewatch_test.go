//go:build mutant_trustwatchorder

package ring

import (
	"testing"
	"time"

	"github.com/kshard/kshard/internal/handoffsim"
)

// TestCoordinatorSimulationFindsStaleViewsWithoutDefence shows the
// stale-view fault reaches the cores behind the real coordinator too: built
// with the tag mutant_trustwatchorder, whose core trusts the watch's order
// (internal/handoff's stalewatch_mutant.go), the simulation finds a violation.
// The tag is for this test alone: the package's other tests would judge
// the mutant, not the product.
func TestCoordinatorSimulationFindsStaleViewsWithoutDefence(t *testing.T) {
	opts := handoffsim.Options{Shell: newSimShell, ClockSkewPPM: -1, StopAtSafety: true}
	s := handoffsim.RunSeeds(0, 4000, opts)
	t.Logf("stale views, defence off (mutant): seeds=%d violations=%d (safety %d), %d stale views, in %v; first: seed %d: %s",
		s.Seeds, s.Violations, s.Safety, s.StaleViews, s.Elapsed.Round(time.Millisecond), s.First, s.FirstViolation)
	if s.Safety == 0 {
		t.Fatal("no safety violation with stale views and the defence off: the stale-view fault does not reach the coordinator's core")
	}
}
