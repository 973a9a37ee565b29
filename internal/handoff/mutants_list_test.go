package handoff_test

import (
	"bufio"
	"go/build/constraint"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kshard/kshard/internal/handoffsim"
)

// mutants are the core's mutants that TestMutant runs, one per build tag
// (the x_mutant.go files), and the simulation's options for each. Most are
// caught under simOptions(), as TestSimulation runs the real core. Two
// (confirm before void, a new epoch at a fence) broke no seed of 10,000
// with its 1–21 s of faults, only with faults that go on long after
// members became active: they run as TestSimulationClockRate runs the real
// core (clockOptions: 30–70 s of faults, no stale views).
var mutants = []mutantCase{
	{name: "trustwatchorder"},
	{name: "skipdrain"},
	{name: "leavingreleased"},
	{name: "noreadback"},
	{name: "notombstone"},
	{name: "forgetprior"},
	{name: "renewlapse"},
	{name: "noexit"},
	{name: "fencelate"},
	{name: "podgone"},
	{name: "voidunconfirmed", long: true},
	{name: "reuseepoch", long: true},
}

// mutantCase is one of the core's mutants.
type mutantCase struct {
	name string // its tag without the prefix mutant_, and its mutantName
	long bool   // run with clockOptions, not simOptions
}

// mutantRun returns the simulation's options for the mutant name, and how
// many seeds from 0 make test runs the real core on with those options
// (TestSimulation, TestSimulationClockRate): a seed that catches the
// mutant must be one of them, so that the real core is shown clean there.
func mutantRun(t *testing.T, name string) (opts handoffsim.Options, clean int) {
	t.Helper()
	i := slices.IndexFunc(mutants, func(m mutantCase) bool { return m.name == name })
	if i < 0 {
		t.Fatalf("mutant %s is not in the table mutants (mutants_list_test.go)", name)
	}
	if mutants[i].long {
		return clockOptions(handoffsim.DefaultClockSkewPPM), clockSeeds
	}
	return simOptions(), simSeedsCI
}

// TestMutantsListed keeps the mutation test whole: every mutant of the
// core (a file x_mutant.go built only with its tag) has its product
// counterpart x.go built without it, defines what TestMutant reads, and is
// run by make unit and make sim-mutants (the Makefile's STALE_MUTANT and
// HANDOFF_MUTANTS). A mutant missing from a list would not be tested, and
// go test -run '^TestMutant$' passes on a build without that test.
func TestMutantsListed(t *testing.T) {
	files, err := filepath.Glob("*_mutant.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no *_mutant.go file (%v)", err)
	}
	listed := makefileMutants(t)
	tests := map[string]constraint.Expr{}
	for _, f := range []string{"mutants_test.go", "mutant_export_test.go"} {
		tests[f] = buildConstraint(t, f)
	}
	for _, f := range files {
		expr := buildConstraint(t, f)
		tag, ok := expr.(*constraint.TagExpr)
		if !ok || !strings.HasPrefix(tag.Tag, "mutant_") {
			t.Errorf("%s: built with %q, want a single tag mutant_<name>", f, expr)
			continue
		}
		name := strings.TrimPrefix(tag.Tag, "mutant_")
		product := strings.TrimSuffix(f, "_mutant.go") + ".go"
		if got := buildConstraint(t, product).String(); got != "!"+tag.Tag {
			t.Errorf("%s: the product's counterpart of %s is built with %q, want !%s", product, f, got, tag.Tag)
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), "mutantName = "+strconv.Quote(name)) || !strings.Contains(string(src), "mutantBug ") {
			t.Errorf("%s does not define mutantName %q and mutantBug, which TestMutant logs", f, name)
		}
		for test, e := range tests {
			if !e.Eval(func(tg string) bool { return tg == tag.Tag }) {
				t.Errorf("%s is not built with -tags %s: add it to its //go:build line", test, tag.Tag)
			}
		}
		if !slices.ContainsFunc(mutants, func(m mutantCase) bool { return m.name == name }) {
			t.Errorf("%s (-tags %s) is not in the table mutants", f, tag.Tag)
		}
		if !slices.Contains(listed, tag.Tag) {
			t.Errorf("the Makefile's STALE_MUTANT and HANDOFF_MUTANTS (%v) do not list %s: make unit would not run it", listed, tag.Tag)
		}
	}
}

// buildConstraint returns the //go:build expression of file f.
func buildConstraint(t *testing.T, f string) constraint.Expr {
	t.Helper()
	fh, err := os.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if line := sc.Text(); constraint.IsGoBuild(line) {
			expr, err := constraint.Parse(line)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			return expr
		}
	}
	t.Fatalf("%s has no //go:build line", f)
	return nil
}

// makefileMutants returns the tags the Makefile's STALE_MUTANT and
// HANDOFF_MUTANTS list, read from the module root's Makefile.
func makefileMutants(t *testing.T) []string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the package: cannot find the Makefile")
		}
		dir = parent
	}
	mk, err := os.ReadFile(filepath.Join(dir, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	for _, m := range regexp.MustCompile(`(?m)^(?:STALE_MUTANT|HANDOFF_MUTANTS)\s*\??=(.*)$`).FindAllStringSubmatch(string(mk), -1) {
		tags = append(tags, strings.Fields(m[1])...)
	}
	return tags
}
