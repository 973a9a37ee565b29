//go:build mutant_issue41

package handoffsim

import (
	"slices"
	"strings"
	"time"
)

// The cache as it was before issue 41's fix (built only with the tag
// mutant_issue41; labelsizing.go is the product's): with key partitioning
// there is no range partitioner, so a kind created before the ring's first
// Hold got a held set of size 0, its unlabelled view a keeps and a dirty
// set of size 0 (for the view's whole life), and PartitionSet.Add ignored a
// partition outside the set. The view's LIST dropped every object without
// marking a partition dirty, so no later Hold listed them again.

const mutant = "issue 41: a kind's sets sized 0 before the ring's first Hold, out-of-range PartitionSet.Add ignored"

func Mutant() string { return mutant }

func heldBeforeFirstHold(int) int { return 0 }

func (p *proc) markDirty(v *unlView, q int) {
	if uint(q) < uint(v.dirty.Size()) {
		v.dirty.Add(q)
	}
}

// issue41Symptoms are the oracle's findings that issue 41's bug causes: an
// existing object missing from the cache of a process activating its
// partition, or at the end from the process it is active on, and, as that
// process never saw it, left unlabelled.
var issue41Symptoms = []string{
	"cache does not hold it as it activates the partition",
	"where its partition is active, does not cache it",
	"no live process is labelling it",
}

// ReportMutant fails t unless the run s found the mutant by one of its
// symptoms, and logs how many seeds did: never the product model's
// "simulation: seeds=… violations=…" line.
func ReportMutant(t Reporter, name string, s Summary) {
	t.Helper()
	var caught, other []Failure
	by := make([]int, len(issue41Symptoms))
	for _, f := range s.Failed {
		i := slices.IndexFunc(issue41Symptoms, func(sym string) bool { return strings.Contains(f.Violation, sym) })
		if i < 0 {
			other = append(other, f)
			continue
		}
		by[i]++
		caught = append(caught, f)
	}
	if len(caught) == 0 {
		t.Errorf("%s, mutant (%s): not caught in %d seeds (%d processes' views started before the ring's first Hold, %d unlabelled views listed before it); violations: %v",
			name, mutant, s.Seeds, s.Labels.EarlyStarts, s.Labels.ListedBeforeHold, s.Failed)
		return
	}
	first := caught[0]
	for _, f := range caught {
		if f.Seed < first.Seed {
			first = f
		}
	}
	t.Logf("%s, mutant (%s): caught by %d of %d seeds run (first: seed %d) in %v: an object missing as its partition activates %d, missing from its owner's cache at the end %d, left unlabelled %d; other violations %d; %d processes' views started before the ring's first Hold, %d unlabelled views listed before it",
		name, mutant, len(caught), s.Seeds, first.Seed, s.Elapsed.Round(time.Millisecond), by[0], by[1], by[2], len(other), s.Labels.EarlyStarts, s.Labels.ListedBeforeHold)
	t.Logf("seed %d: %s", first.Seed, first.Violation)
	for _, f := range other[:min(len(other), 3)] {
		t.Logf("another violation: seed %d: %s", f.Seed, f.Violation)
	}
}
