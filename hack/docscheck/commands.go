package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// A flagSet holds flag names without their dashes: long names and
// one-letter shorthands.
type flagSet map[string]bool

func (fs flagSet) add(o flagSet) {
	for k := range o {
		fs[k] = true
	}
}

// The binaries whose flags the docs name, as their --help prints them: what
// a user sees is what the docs must match.
type binaries struct {
	kshard   map[string]flagSet // by command; "" for kshard --help
	operator flagSet            // example-operator
	all      flagSet            // both binaries, every command
	// source holds the flag names the repository's other commands define
	// (the benchmark's operators, the test operator), found in their
	// sources: a flag written alone may be one of theirs.
	source flagSet
}

// Make targets the docs name that belong to other Makefiles, with why.
var foreignTargets = map[string]string{
	"deploy": "the kubebuilder scaffold's (docs/adapter.md's conversion)",
}

// Flags the docs name that belong to other tools, with why they are named.
var foreignFlags = map[string]string{
	"flag":         "the docs' placeholder for any flag (`--flag`)",
	"leader-elect": "the kubebuilder scaffold's flag, which docs/adapter.md says to keep",
	"help":         "every command's",
	"h":            "every command's",
}

const (
	kshardPkg   = "./cmd/kshard"
	operatorPkg = "./cmd/example-operator"
)

// loadBinaries builds kshard and the example operator and reads the flags
// of every command from --help. They are kept in _output/docscheck (ignored
// by git): go build leaves a binary that is up to date as it is, so a later
// run skips the link, most of the time this check takes.
func loadBinaries(ctx context.Context, root string) (*binaries, error) {
	dir := filepath.Join(root, "_output", "docscheck")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if _, err := goCmd(ctx, root, "build", "-o", dir+string(filepath.Separator), kshardPkg, operatorPkg); err != nil {
		return nil, err
	}
	b := &binaries{kshard: map[string]flagSet{}, all: flagSet{}}
	kshard := filepath.Join(dir, path.Base(kshardPkg))
	top, commands, err := help(ctx, kshard)
	if err != nil {
		return nil, err
	}
	if len(commands) == 0 {
		return nil, fmt.Errorf("kshard --help lists no command under \"Commands:\": docscheck reads each command's flags from there")
	}
	if len(top) == 0 {
		return nil, fmt.Errorf("kshard --help lists no flag: docscheck reads them from lines that start with one")
	}
	b.kshard[""] = top
	b.all.add(top)
	for _, cmd := range commands {
		fs, _, err := help(ctx, kshard, cmd)
		if err != nil {
			return nil, err
		}
		b.kshard[cmd] = fs
		b.all.add(fs)
	}
	if b.operator, _, err = help(ctx, filepath.Join(dir, path.Base(operatorPkg))); err != nil {
		return nil, err
	}
	b.all.add(b.operator)
	return b, nil
}

// help runs bin args... --help and parses the flags and commands it lists.
func help(ctx context.Context, bin string, args ...string) (flagSet, []string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, "--help")...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=/nonexistent") // help touches no cluster
	out, _ := cmd.CombinedOutput()                            // --help may exit non-zero
	name := strings.TrimSpace(filepath.Base(bin) + " " + strings.Join(args, " "))
	if ctx.Err() != nil {
		return nil, nil, fmt.Errorf("%s --help did not end in 30s", name)
	}
	if strings.TrimSpace(string(out)) == "" {
		return nil, nil, fmt.Errorf("%s --help printed nothing", name)
	}
	fs, commands := parseHelp(string(out))
	return fs, commands, nil
}

var helpFlag = regexp.MustCompile(`^-{1,2}([A-Za-z0-9][\w.-]*)`)

// parseHelp reads a help text: a line whose first word is a flag lists
// flags separated by commas (`-n, --namespace NS  …`, `--cluster,
// --user, …`, Go's `-kubeconfig string`); the lines of a "Commands:"
// section up to a blank line name commands.
func parseHelp(out string) (flagSet, []string) {
	fs := flagSet{}
	var commands []string
	inCommands := false
	for _, line := range strings.Split(out, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasSuffix(t, "ommands:") {
			inCommands = true
			continue
		}
		if inCommands {
			if t == "" {
				inCommands = false
			} else if line != t {
				commands = append(commands, strings.Fields(t)[0])
			}
			continue
		}
		if !strings.HasPrefix(t, "-") {
			continue
		}
		for _, w := range strings.Split(t, ",") {
			m := helpFlag.FindStringSubmatch(strings.TrimSpace(w))
			if m == nil {
				break
			}
			fs[m[1]] = true
		}
	}
	return fs, commands
}

var sourceFlag = regexp.MustCompile(`\.(?:Bool|Int|Int64|Uint|Uint64|String|Float64|Duration|Func|BoolFunc|TextVar|StringSlice|StringArray|Count|)(?:Var)?P?\((?:[^,()"]+,\s*)?"([a-z][\w.-]*)"`)

// sourceFlags returns the flag names the non-test Go files under root
// define through the flag or pflag packages with a literal name.
func sourceFlags(root string) (flagSet, error) {
	fs := flagSet{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			n := d.Name()
			if p != root && (n == "testdata" || n == "vendor" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range sourceFlag.FindAllSubmatch(src, -1) {
			fs[string(m[1])] = true
		}
		return nil
	})
	return fs, err
}

var (
	envAssign = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	testPiece = regexp.MustCompile(`^(Test|Benchmark|Example|Fuzz)\w*$`)
)

// shellWords splits a command line into commands at ;, &&, || and |, and
// each into words, dropping a comment and a leading "$ " prompt.
func shellWords(line string) [][]string {
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	if strings.HasPrefix(strings.TrimSpace(line), "#") {
		return nil
	}
	line = strings.TrimPrefix(strings.TrimSpace(line), "$ ")
	var cmds [][]string
	var cur []string
	for _, w := range strings.Fields(line) {
		switch w {
		case ";", "&&", "||", "|":
			cmds = append(cmds, cur)
			cur = nil
			continue
		}
		cur = append(cur, w)
	}
	return append(cmds, cur)
}

// checkCommand checks one command: make targets, the flags of kshard (also
// as kubectl shard) and the example operator, and go test's -run and
// -bench against the tests. standalone is set for a code span that is a
// flag alone (`--ring NAME`, `-n/--namespace`): its flags must be some
// binary's. Other commands are not ours and are left alone.
func (c *checker) checkCommand(words []string, standalone bool) []string {
	for len(words) > 0 && envAssign.MatchString(words[0]) {
		words = words[1:]
	}
	if len(words) == 0 {
		return nil
	}
	var problems []string
	first := words[0]
	switch {
	case standalone:
		for _, w := range words {
			for _, part := range strings.Split(w, "/") {
				if !strings.HasPrefix(part, "-") || part == "-" {
					continue
				}
				name, ok := flagName(part, false)
				if !ok {
					continue
				}
				c.stats.flags++
				if !c.bins.all[name] && !c.bins.source[name] && foreignFlags[name] == "" {
					problems = append(problems, fmt.Sprintf("flag %s: no binary of the repository defines it (kshard and its commands, example-operator: their --help)", part))
				}
			}
		}
	case first == "make":
		for _, w := range words[1:] {
			if strings.HasPrefix(w, "-") || strings.ContainsAny(w, "=<>…") {
				continue // a make flag, a variable, a placeholder
			}
			c.stats.targets++
			if !c.targets[w] && foreignTargets[w] == "" {
				problems = append(problems, fmt.Sprintf("make %s: the Makefile has no target %s", w, w))
			}
		}
	case first == "go" && len(words) > 2 && words[1] == "run" && isBinary(words[2]) != "":
		problems = c.checkFlags(isBinary(words[2]), words[3:])
	case first == "go" && len(words) > 1 && words[1] == "test":
		problems = c.checkTestFlags(words[2:])
	case first == "kubectl" && len(words) > 1 && words[1] == "shard":
		problems = c.checkFlags("kshard", words[2:])
	case isBinary(first) != "":
		problems = c.checkFlags(isBinary(first), words[1:])
	case c.bins.kshard[first] != nil && first != "" && len(words) > 1:
		// A kshard command written without the binary: `status -n ns`.
		problems = c.checkFlags("kshard", words)
	}
	return problems
}

// isBinary names the binary a command word runs: "kshard" for kshard and
// kubectl-shard, "example-operator", or "".
func isBinary(w string) string {
	switch path.Base(w) {
	case "kshard", "kubectl-shard":
		return "kshard"
	case "example-operator":
		return "example-operator"
	}
	return ""
}

// flagName returns the name of a flag word (--name=value, --name, -x);
// goStyle accepts -name as Go's flag package does.
func flagName(w string, goStyle bool) (string, bool) {
	w, _, _ = strings.Cut(w, "=")
	switch {
	case strings.HasPrefix(w, "--") && len(w) > 2:
		return strings.TrimPrefix(w, "--"), true
	case strings.HasPrefix(w, "-") && len(w) == 2:
		return w[1:], true
	case goStyle && strings.HasPrefix(w, "-") && len(w) > 2:
		return w[1:], true
	}
	return "", false // -race, -quick: another tool's single-dash flags
}

func (c *checker) checkFlags(bin string, args []string) []string {
	var allowed flagSet
	name := bin
	switch bin {
	case "kshard":
		allowed = flagSet{}
		allowed.add(c.bins.kshard[""])
		for _, a := range args {
			if fs := c.bins.kshard[a]; fs != nil && a != "" {
				allowed.add(fs)
				name = "kshard " + a
				break
			}
		}
	case "example-operator":
		allowed = c.bins.operator
	}
	var problems []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			continue
		}
		flag, ok := flagName(a, bin == "example-operator")
		if !ok {
			continue
		}
		c.stats.flags++
		if !allowed[flag] && foreignFlags[flag] == "" {
			problems = append(problems, fmt.Sprintf("%s %s: %s --help lists no such flag", name, a, name))
		}
	}
	return problems
}

// checkTestFlags checks go test's -run and -bench patterns that name tests.
func (c *checker) checkTestFlags(args []string) []string {
	var problems []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		var flag, val string
		switch {
		case a == "-run" || a == "-bench":
			if i+1 >= len(args) {
				continue
			}
			flag, val = a, args[i+1]
			i++
		case strings.HasPrefix(a, "-run=") || strings.HasPrefix(a, "-bench="):
			flag, val, _ = strings.Cut(a, "=")
		default:
			continue
		}
		val = strings.Trim(val, `'"`)
		for _, piece := range strings.Split(val, "|") {
			piece, _, _ = strings.Cut(piece, "/")
			bare := strings.Trim(piece, "^$")
			prefix := "Benchmark"
			if flag == "-run" {
				if !testPiece.MatchString(bare) {
					continue
				}
				prefix = ""
			} else if !exported(bare) || strings.ContainsAny(bare, ".*+?[]()") {
				continue
			}
			re, err := regexp.Compile(piece)
			if err != nil {
				continue
			}
			c.stats.tests++
			found := false
			for f := range c.idx.testFuncs {
				if strings.HasPrefix(f, prefix) && re.MatchString(f) {
					found = true
					break
				}
			}
			if !found {
				problems = append(problems, fmt.Sprintf("go test %s %s: no test function matches %s", flag, val, piece))
			}
		}
	}
	return problems
}

var makeTarget = regexp.MustCompile(`(?m)^([A-Za-z0-9][\w.-]*(?:[ \t]+[A-Za-z0-9][\w.-]*)*)[ \t]*:(?:[^=]|$)`)

// makeTargets returns the targets the Makefile defines.
func makeTargets(src string) map[string]bool {
	targets := map[string]bool{}
	for _, m := range makeTarget.FindAllStringSubmatch(src, -1) {
		for _, t := range strings.Fields(m[1]) {
			targets[t] = true
		}
	}
	return targets
}

// undocumentedTargets returns the Makefile's targets that docs/testing.md,
// the page that lists them, never names in code.
func undocumentedTargets(targets map[string]bool, md markdown) []string {
	named := map[string]bool{}
	for _, s := range md.spans {
		for _, w := range strings.FieldsFunc(s.text, func(r rune) bool { return r == ' ' || r == ',' }) {
			named[w] = true
		}
	}
	for _, b := range md.blocks {
		for _, w := range strings.Fields(b.text) {
			named[w] = true
		}
	}
	var missing []string
	for t := range targets {
		if !named[t] {
			missing = append(missing, t)
		}
	}
	sort.Strings(missing)
	return missing
}

// undocumentedKeys returns the keys no code span of md names.
func undocumentedKeys(keys []string, md markdown) []string {
	named := map[string]bool{}
	for _, s := range md.spans {
		for _, w := range strings.FieldsFunc(s.text, func(r rune) bool { return r == ' ' || r == ',' || r == '=' }) {
			named[w] = true
		}
	}
	var missing []string
	for _, k := range keys {
		if !named[k] {
			missing = append(missing, k)
		}
	}
	return missing
}
