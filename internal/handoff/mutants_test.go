//go:build mutant_trustwatchorder || mutant_skipdrain || mutant_leavingreleased || mutant_noreadback || mutant_reuseepoch || mutant_voidunconfirmed || mutant_notombstone || mutant_forgetprior || mutant_renewlapse || mutant_noexit || mutant_fencelate || mutant_podgone

package handoff_test

import (
	"cmp"
	"flag"
	"slices"
	"testing"
	"time"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/internal/handoffsim"
)

// The mutation test of the simulation: the core built as a mutant, with one
// defence of the protocol removed or broken (a file pair per mutant, x.go
// for the product and x_mutant.go for the mutant, chosen by one build tag
// each: never a switch of the shipped core), must break a safety invariant
// in the simulation within -mutant.seeds seeds. make unit runs TestMutant
// once per tag (the Makefile's STALE_MUTANT and HANDOFF_MUTANTS), stopping
// at the first catch; make sim-mutants runs every seed and counts those
// that catch it:
//
//	go test -tags mutant_skipdrain -run '^TestMutant$' ./internal/handoff/
//
// A build with a mutant's tag is for this test alone: the package's other
// tests would judge the mutant, not the product. Its logs never use the
// "simulation: seeds=… violations=…" line that reports the real core.

var (
	mutantSeeds = flag.Int("mutant.seeds", 10000, "seeds TestMutant may run to catch the core's mutant; it stops at the first safety violation unless -mutant.all")
	mutantAll   = flag.Bool("mutant.all", false, "run every one of -mutant.seeds and count the seeds that catch the mutant")
)

// TestMutant runs the simulation with the mutant core this build carries
// from seed 0 on and fails unless a seed breaks a safety invariant within
// -mutant.seeds seeds, and within the seeds make test runs the real core on
// with the same options (mutantRun), which shows the real core clean on
// the seed that catches the mutant. A liveness failure does not count as a
// catch: every mutant removes a safety defence. -handoff.seed=S replays
// seed S with its trace.
func TestMutant(t *testing.T) {
	name := handoff.MutantName
	opts, clean := mutantRun(t, name)
	if *simSeed >= 0 {
		opts.Trace = true
		r := handoffsim.Run(uint64(*simSeed), opts)
		t.Logf("mutant %s (%s): seed %d, %d steps, trace:\n%s", name, handoff.MutantBug, r.Seed, r.Steps, r.Trace)
		t.Logf("mutant %s: seed %d violation: %q", name, r.Seed, r.Violation)
		return
	}
	n := *mutantSeeds
	if !*mutantAll {
		n = min(n, clean) // a later catch fails below anyway
	}
	opts.StopAtSafety = !*mutantAll
	s := handoffsim.RunSeeds(0, n, opts)
	caught := slices.DeleteFunc(slices.Clone(s.Failed), func(f handoffsim.Failure) bool { return !f.Safety() })
	if len(caught) == 0 {
		t.Fatalf("mutant %s (%s): not caught in %d seeds (%d liveness failures): the simulation no longer finds this bug",
			name, handoff.MutantBug, s.Seeds, len(s.Failed))
	}
	// RunSeeds hands seeds out in order and finishes every seed it started,
	// so every seed below the lowest catching one ran without a safety
	// violation: the seeds needed do not depend on scheduling.
	first := slices.MinFunc(caught, func(a, b handoffsim.Failure) int { return cmp.Compare(a.Seed, b.Seed) })
	t.Logf("mutant %s: caught at seed %d after %d seeds (violation: %s)", name, first.Seed, first.Seed+1, first.Violation)
	t.Logf("mutant %s models: %s", name, handoff.MutantBug)
	if first.Seed >= uint64(clean) {
		t.Errorf("mutant %s: first caught at seed %d, beyond the %d seeds make test runs the real core on with these options: a catch there does not show the real core clean on the same seed",
			name, first.Seed, clean)
	}
	if *mutantAll {
		t.Logf("mutant %s: caught by %d of %d seeds in %v (%d more failed liveness only)",
			name, len(caught), s.Seeds, s.Elapsed.Round(time.Millisecond), len(s.Failed)-len(caught))
	}
}
