//go:build mutant_issue41

package handoffsim

import (
	"flag"
	"strings"
	"testing"
	"time"
)

// Run with the tag that builds the mutant (make sim-mutants):
//
//	go test -tags mutant_issue41 -run TestMutantIssue41 ./internal/handoffsim/
//
// Built so, the labels model is the cache before issue 41's fix
// (labelsizing_issue41.go); every other test of the package would then
// judge the mutant, not the product, which is why the tag is for this test
// alone.

var mutantSeeds = flag.Int("mutant.seeds", 200, "seeds TestMutantIssue41 may run to catch the mutant; it stops at the first unless -mutant.all")

var mutantAll = flag.Bool("mutant.all", false, "run every one of -mutant.seeds and count the seeds that catch the mutant")

// TestMutantIssue41 shows that the labels model finds issue 41's bug in the
// cache as it was: a replica whose kind's views started before the ring's
// first Hold listed its unlabelled objects into sets of size 0, dropped
// them all without marking a partition dirty, and so never listed them
// again once it held their partitions; it activates them with those objects
// missing from its cache. The oracle must say so, at the activation
// (labelsAdmit) or at the seed's end (checkLabelsCached).
func TestMutantIssue41(t *testing.T) {
	if mutant == "" {
		t.Fatal("built without the mutant: run with -tags mutant_issue41")
	}
	opts := Options{Labels: true, LabelFixes: AllLabelFixes, StopAtSafety: !*mutantAll}
	s := RunSeeds(0, *mutantSeeds, opts)
	var caught []Failure
	for _, f := range s.Failed {
		if strings.Contains(f.Violation, "cache does not hold it as it activates the partition") ||
			strings.Contains(f.Violation, "does not cache it") {
			caught = append(caught, f)
		}
	}
	if len(caught) == 0 {
		t.Fatalf("mutant (%s) not caught in %d seeds (%d early view starts, %d unlabelled views listed before the first Hold); violations: %v",
			mutant, s.Seeds, s.Labels.EarlyStarts, s.Labels.ListedBeforeHold, s.Failed)
	}
	first := caught[0]
	for _, f := range caught {
		if f.Seed < first.Seed {
			first = f
		}
	}
	t.Logf("mutant (%s): caught by %d of %d seeds run (first: seed %d), %d violations in all, in %v; %d early view starts, %d unlabelled views listed before the first Hold",
		mutant, len(caught), s.Seeds, first.Seed, s.Violations, s.Elapsed.Round(time.Millisecond), s.Labels.EarlyStarts, s.Labels.ListedBeforeHold)
	t.Logf("seed %d: %s", first.Seed, first.Violation)
}
