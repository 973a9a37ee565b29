package handoffsim

import (
	"fmt"
	"strings"
	"testing"
)

// reporter records what ReportFailed says.
type reporter struct{ errors []string }

func (r *reporter) Helper()             {}
func (r *reporter) Logf(string, ...any) {}
func (r *reporter) Errorf(format string, a ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, a...))
}

// A long run finds several kinds of violation at once: every failing seed
// must be named, safety ones first, while only the first few are traced.
func TestReportFailedNamesEverySeed(t *testing.T) {
	var s Summary
	for _, f := range []Failure{
		{Seed: 9, Violation: "liveness: converged late"},
		{Seed: 7, Violation: "two replicas active on partition 1"},
		{Seed: 3, Violation: "liveness: converged late"},
		{Seed: 5, Violation: "liveness: converged late"},
		{Seed: 1, Violation: "liveness: converged late"},
	} {
		s.add(Result{Seed: f.Seed, Violation: f.Violation})
	}
	var r reporter
	ReportFailed(&r, s, Options{}, "replay %d")
	if len(r.errors) != 1+tracedFailures {
		t.Fatalf("%d errors reported, want the list and %d traces", len(r.errors), tracedFailures)
	}
	list := r.errors[0]
	if !strings.HasPrefix(list, "5 failing seeds (1 safety):") || !strings.Contains(list, "replay one: replay 7") {
		t.Errorf("list does not count the seeds or name the safety seed to replay:\n%s", list)
	}
	last := -1
	for _, seed := range []uint64{7, 1, 3, 5, 9} {
		at := strings.Index(list, fmt.Sprintf("seed %d: ", seed))
		if at <= last {
			t.Errorf("seed %d missing or out of order (safety first, then by seed):\n%s", seed, list)
		}
		last = at
	}
	for i, seed := range []uint64{7, 1, 3} {
		if !strings.HasPrefix(r.errors[1+i], fmt.Sprintf("seed %d: ", seed)) || !strings.Contains(r.errors[1+i], "trace:\n") {
			t.Errorf("trace %d is not seed %d's: %.80q", i, seed, r.errors[1+i])
		}
	}
}

// A seed of the labels model replays exactly, trace and all: its views,
// pending objects and labeller must not depend on Go's map order.
func TestLabelsReplayExactly(t *testing.T) {
	opts := Options{Labels: true, LabelFixes: AllLabelFixes, Trace: true}
	for _, seed := range []uint64{1, 2, 3, 4} {
		a, b := Run(seed, opts), Run(seed, opts)
		if a.Trace != b.Trace || a.Steps != b.Steps {
			t.Fatalf("seed %d ran differently twice (%d and %d steps)", seed, a.Steps, b.Steps)
		}
		if a.Labels.Patches == 0 || !strings.Contains(a.Trace, "label write lands") {
			t.Fatalf("seed %d: no label write in the trace: the labels model did not run", seed)
		}
	}
}
