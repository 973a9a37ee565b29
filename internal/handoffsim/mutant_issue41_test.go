//go:build mutant_issue41

package handoffsim

import (
	"flag"
	"testing"
)

// Built with the tag mutant_issue41 (make sim-mutants), the labels model is
// the cache before issue 41's fix (labelsizing_issue41.go): every other test
// of the package would then judge the mutant, not the product, which is
// why the tag is for the mutant tests alone:
//
//	go test -tags mutant_issue41 -run Mutant ./internal/handoffsim/ ./shard/ring/

var (
	mutantSeeds = flag.Int("mutant.seeds", 200, "seeds TestMutantIssue41 may run to catch the mutant; it stops at the first safety violation unless -mutant.all")
	mutantAll   = flag.Bool("mutant.all", false, "run every one of -mutant.seeds and count the seeds that catch the mutant")
)

// TestMutantIssue41 shows that the labels model finds issue 41's bug in the
// cache as it was: a replica whose kind's views started before the ring's
// first Hold listed its unlabelled objects into sets of size 0, dropped
// them all without marking a partition dirty, and so never listed them
// again once it held their partitions; it activates them with those objects
// missing from its cache.
func TestMutantIssue41(t *testing.T) {
	if mutant == "" {
		t.Fatal("built without the mutant: run with -tags mutant_issue41")
	}
	s := RunSeeds(0, *mutantSeeds, Options{Labels: true, LabelFixes: AllLabelFixes, StopAtSafety: !*mutantAll})
	ReportMutant(t, "labels model", s)
}
