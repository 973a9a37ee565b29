package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

func TestCodeSpansAndBlocks(t *testing.T) {
	src := strings.Join([]string{
		"# `Title`",                             // 1
		"A `span` and ``a `quoted` one`` and a", // 2
		"span `over two",                        // 3
		"lines`; an \\`escaped one.",            // 4
		"",                                      // 5
		"<!-- docs-check: var x int -->",        // 6
		"```go",                                 // 7
		"x = 1 // `not a span`",                 // 8
		"```",                                   // 9
		"",                                      // 10
		"<!-- a comment -->",                    // 11
		"",                                      // 12
		"  ~~~sh title",                         // 13
		"  make test",                           // 14
		"  ~~~",                                 // 15
		"`unclosed",                             // 16
	}, "\n")
	md := parseMarkdown(src, 1, 0)
	var spans []span
	spans = append(spans, md.spans...)
	want := []span{{1, "Title"}, {2, "span"}, {2, "a `quoted` one"}, {3, "over two lines"}}
	if !reflect.DeepEqual(spans, want) {
		t.Errorf("spans = %v, want %v", spans, want)
	}
	if len(md.blocks) != 2 {
		t.Fatalf("blocks = %+v, want 2", md.blocks)
	}
	if b := md.blocks[0]; b.info != "go" || b.line != 8 || b.text != "x = 1 // `not a span`" || !b.hasDir || b.directive != "var x int" || b.dirLine != 6 {
		t.Errorf("go block = %+v", b)
	}
	if b := md.blocks[1]; b.info != "sh" || b.line != 14 || b.text != "make test" || b.hasDir {
		t.Errorf("sh block = %+v (a comment not right above the fence is no directive)", b)
	}
}

func TestUnreleasedRange(t *testing.T) {
	src := "# Changelog\n\n## [Unreleased]\n\n- `New`\n\n## [0.1.0] - 2026-01-01\n\n- `Old`\n"
	from, to, ok := unreleasedRange(src)
	if !ok || from != 3 || to != 6 {
		t.Fatalf("unreleasedRange = %d, %d, %v; want 3, 6, true", from, to, ok)
	}
	md := parseMarkdown(src, from, to)
	if len(md.spans) != 1 || md.spans[0].text != "New" {
		t.Errorf("spans of [Unreleased] = %v, want only New", md.spans)
	}
}

func TestGoRefs(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string // String() and kind of each chain
	}{
		{"GracePeriod(d)", []string{"GracePeriod bare", "d "}},
		{"shard/cache.ProbeShardFiltering", []string{"shard/cache.ProbeShardFiltering qualified"}},
		{"kshard.io/ring=<ring>", []string{"ring ", "ring "}},
		{"ring.go", []string{"ring "}}, // go is a keyword
		{"hack/set-version.sh vX.Y.Z", []string{"hack/set ", "version.sh ", "vX.Y.Z "}},
		{"BenchmarkPartitionOf*", []string{"BenchmarkPartitionOf test"}},
		{"POD_NAME", []string{"POD_NAME "}},
		{"LeaseDuration", []string{"LeaseDuration bare"}},
		{"controller.GenerationChangedPredicate{}", []string{"controller.GenerationChangedPredicate qualified"}},
		{"ListMeta.ShardInfo.Selector", []string{"ListMeta.ShardInfo.Selector qualified"}},
	} {
		var got []string
		for _, r := range goRefs(tc.text) {
			got = append(got, r.String()+" "+r.kind())
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("goRefs(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

func readFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseHelp(t *testing.T) {
	fs, commands := parseHelp(readFixture(t, "help/kshard.txt"))
	if want := []string{"status", "release"}; !reflect.DeepEqual(commands, want) {
		t.Errorf("commands = %q, want %q", commands, want)
	}
	want := []string{"cluster", "lease-namespace", "n", "namespace", "server", "token", "user"}
	if got := keys(fs); !reflect.DeepEqual(got, want) {
		t.Errorf("flags = %q, want %q", got, want)
	}
	fs, _ = parseHelp(readFixture(t, "help/example-operator.txt"))
	if got, want := keys(fs), []string{"kubeconfig", "ring"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Go-style flags = %q, want %q", got, want)
	}
}

func keys(fs flagSet) []string {
	var k []string
	for f := range fs {
		k = append(k, f)
	}
	sort.Strings(k)
	return k
}

func TestMakeTargets(t *testing.T) {
	got := keys(flagSet(makeTargets(readFixture(t, "Makefile"))))
	if want := []string{"docs-check", "test", "unit"}; !reflect.DeepEqual(got, want) {
		t.Errorf("targets = %q, want %q", got, want)
	}
	md := parseMarkdown("`test`, `docs-check`\n\n```sh\nmake unit\n```\n", 1, 0)
	if missing := undocumentedTargets(map[string]bool{"test": true, "unit": true, "docs-check": true, "tidy": true}, md); !reflect.DeepEqual(missing, []string{"tidy"}) {
		t.Errorf("undocumented = %q, want [tidy]", missing)
	}
}

// fixtureChecker checks against testdata: the module testdata/mod, the
// help texts in testdata/help, testdata/Makefile.
func fixtureChecker(t *testing.T) *checker {
	t.Helper()
	root, err := filepath.Abs("testdata/mod")
	if err != nil {
		t.Fatal(err)
	}
	idx, err := loadIndex(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	b := &binaries{kshard: map[string]flagSet{}, all: flagSet{}, source: flagSet{}}
	top, commands := parseHelp(readFixture(t, "help/kshard.txt"))
	b.kshard[""] = top
	b.all.add(top)
	for _, cmd := range commands {
		fs, _ := parseHelp(readFixture(t, "help/kshard-"+cmd+".txt"))
		b.kshard[cmd] = fs
		b.all.add(fs)
	}
	b.operator, _ = parseHelp(readFixture(t, "help/example-operator.txt"))
	b.all.add(b.operator)
	return &checker{root: root, idx: idx, bins: b, targets: makeTargets(readFixture(t, "Makefile"))}
}

// TestPlanted checks testdata/planted.md: every line marked PLANTED, and the
// skip without a reason, must have a problem, and no other line any.
func TestPlanted(t *testing.T) {
	c := fixtureChecker(t)
	src := readFixture(t, "planted.md")
	problems := c.checkDoc("planted.md", src)
	byLine := map[int][]string{}
	for _, p := range problems {
		if p.file != "planted.md" {
			t.Errorf("problem in %s, want planted.md: %s", p.file, p)
		}
		byLine[p.line] = append(byLine[p.line], p.msg)
	}
	planted := 0
	for i, l := range strings.Split(src, "\n") {
		line := i + 1
		if strings.Contains(l, "PLANTED") && !strings.Contains(l, "marked PLANTED") || l == "<!-- docs-check: skip -->" {
			planted++
			if len(byLine[line]) == 0 {
				t.Errorf("planted.md:%d: no problem found in %q", line, l)
			}
			delete(byLine, line)
		}
	}
	for line, msgs := range byLine {
		t.Errorf("planted.md:%d: unexpected problems: %q", line, msgs)
	}
	if planted != 15 {
		t.Errorf("%d planted lines, want 15 (the fixture changed?)", planted)
	}
	if s := c.stats; s.blocks != 5 || s.skipped != 2 {
		t.Errorf("Go blocks: %d built, %d skipped; want 5 and 2", s.blocks, s.skipped)
	}
	if t.Failed() {
		for _, p := range problems {
			t.Log(p)
		}
	}
}

// TestTree checks the repository's docs as make docs-check does, expecting
// none, and then a doc with a planted `GracePeriod(` and a planted flag
// against the real packages and binaries.
func TestTree(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the workspace's packages and kshard's binaries; -short skips it")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	c, err := newChecker(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	problems, err := c.checkTree()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("docs-check: %s", p)
	}
	if c.stats.goRefs < 300 || c.stats.flags < 50 || c.stats.blocks < 5 {
		t.Errorf("the tree's docs gave %+v: fewer references than they hold (the extraction broke?)", c.stats)
	}
	planted := strings.Join([]string{
		"The drain waits `GracePeriod(d)`.",                         // 1
		"Set `controller.GracePeriod(0)` to cancel at once.",        // 2
		"Revoke with `Revoke(ctx, set, fence)`.",                    // 3
		"`kshard status --bogus-flag`",                              // 4
		"`--no-such-flag`",                                          // 5
		"`kubectl shard status -n ns --lease-namespace ns -o yaml`", // 6
		"`example-operator --ring r --no-such-operator-flag`",       // 7
	}, "\n")
	got := map[int]bool{}
	for _, p := range c.checkDoc("planted.md", planted) {
		got[p.line] = true
		t.Log(p)
	}
	if want := map[int]bool{1: true, 2: true, 4: true, 5: true, 7: true}; !reflect.DeepEqual(got, want) {
		t.Errorf("lines with problems = %v, want %v", got, want)
	}
}

func TestLeaseKeys(t *testing.T) {
	c := fixtureChecker(t)
	keys := c.idx.leaseKeys()
	if want := []string{"kshard.io/returning", "kshard.io/ring"}; !reflect.DeepEqual(keys, want) {
		t.Fatalf("leaseKeys = %q, want %q", keys, want)
	}
	md := parseMarkdown("| label `kshard.io/ring` | the ring |\n\nselect `kshard.io/ring=x`\n", 1, 0)
	if missing := undocumentedKeys(keys, md); !reflect.DeepEqual(missing, []string{"kshard.io/returning"}) {
		t.Errorf("undocumented = %q, want [kshard.io/returning]", missing)
	}
}

func TestDocsOutsideGit(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"README.md", "docs/a.md", "docs/b.txt", "sub/README.md", ".hidden/README.md", "other.md"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(dir)) // not the repository around a temporary directory
	got, err := docs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"README.md", "docs/a.md", "sub/README.md"}; !reflect.DeepEqual(got, want) {
		t.Errorf("docs = %q, want %q", got, want)
	}
}

// TestAlertNamesResolve: a name of an alert of the rules file resolves
// like a Go identifier; a misspelt one does not.
func TestAlertNamesResolve(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, filepath.Dir(alertRules)), 0o755); err != nil {
		t.Fatal(err)
	}
	rules := "groups:\n  - name: g\n    rules:\n      - alert: KshardSomethingWrong\n        expr: vector(1)\n"
	if err := os.WriteFile(filepath.Join(root, alertRules), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	alerts, err := loadAlerts(root)
	if err != nil {
		t.Fatal(err)
	}
	idx := &index{alerts: alerts}
	if msg := idx.resolve(goRef{chain: []string{"KshardSomethingWrong"}}); msg != "" {
		t.Errorf("the rules file's alert does not resolve: %s", msg)
	}
	if msg := idx.resolve(goRef{chain: []string{"KshardSomethingRight"}}); msg == "" {
		t.Error("an alert the rules file lacks resolved")
	}
}

// TestTutorialScript: a tutorial page becomes a script that writes its
// files where the page says, in order with its shell blocks, takes the
// published version where the page requires v0.1.0, and runs.
func TestTutorialScript(t *testing.T) {
	page := strings.Join([]string{
		"<!-- docs-check: tutorial run -->",
		"```sh",
		"mkdir -p mod && cd mod",
		"echo 'require github.com/kshard/kshard@v0.1.0' > req.txt",
		"```",
		"<!-- docs-check: tutorial mod/sub/file.txt -->",
		"```text",
		"KSHARD_TUTORIAL_EOF and $HOME stay as written",
		"```",
		"```sh",
		"echo not part of the tutorial > ignored",
		"```",
		"<!-- docs-check: tutorial run -->",
		"```sh",
		"cat sub/file.txt > copy.txt",
		"```",
	}, "\n")
	script, err := tutorialScript("page.md", page, "v0.0.0-local.1")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the script failed: %v\n%s\nscript:\n%s", err, out, script)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got, want := read("mod/req.txt"), "require github.com/kshard/kshard@v0.0.0-local.1\n"; got != want {
		t.Errorf("req.txt = %q, want %q", got, want)
	}
	if got, want := read("mod/copy.txt"), "KSHARD_TUTORIAL_EOF and $HOME stay as written\n"; got != want {
		t.Errorf("the file block came out as %q, want %q", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "mod", "ignored")); err == nil {
		t.Error("a shell block without the tutorial directive ran")
	}

	for _, bad := range []string{"../outside.go", "/abs.go", "a b.go"} {
		if _, err := tutorialScript("page.md", "<!-- docs-check: tutorial "+bad+" -->\n```go\npackage x\n```\n<!-- docs-check: tutorial run -->\n```sh\ntrue\n```", ""); err == nil {
			t.Errorf("tutorial file %q accepted", bad)
		}
	}
	if _, err := tutorialScript("page.md", "<!-- docs-check: tutorial run -->\n```go\npackage x\n```", ""); err == nil {
		t.Error("a run block of Go accepted")
	}
	if _, err := tutorialScript("page.md", "no blocks", ""); err == nil {
		t.Error("a page with nothing to run accepted")
	}
}
