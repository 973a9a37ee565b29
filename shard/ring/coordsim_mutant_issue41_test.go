//go:build mutant_issue41

package ring

import (
	"flag"
	"testing"

	"github.com/kshard/kshard/internal/handoffsim"
)

var (
	coordMutantSeeds = flag.Int("mutant.seeds", 200, "seeds TestCoordinatorMutantIssue41 may run to catch the mutant; it stops at the first safety violation unless -mutant.all")
	coordMutantAll   = flag.Bool("mutant.all", false, "run every one of -mutant.seeds and count the seeds that catch the mutant")
)

// TestCoordinatorMutantIssue41 is internal/handoffsim's TestMutantIssue41
// with the real coordinator as the shell: its first Hold (of no partition,
// as it joins) sizes the cache's held set, so only views that started and
// listed before it meet the bug. Built with the tag mutant_issue41 (make
// sim-mutants) alone: the package's other simulations would judge the
// mutant, not the product.
func TestCoordinatorMutantIssue41(t *testing.T) {
	if handoffsim.Mutant() == "" {
		t.Fatal("built without the mutant: run with -tags mutant_issue41")
	}
	opts := handoffsim.Options{Shell: newSimShell, Labels: true, LabelFixes: handoffsim.AllLabelFixes, StopAtSafety: !*coordMutantAll}
	handoffsim.ReportMutant(t, "coordinator labels model", handoffsim.RunSeeds(0, *coordMutantSeeds, opts))
}
