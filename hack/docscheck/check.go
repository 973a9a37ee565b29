package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

type checker struct {
	root    string
	verbose io.Writer // each reference checked, when set
	idx     *index
	bins    *binaries
	targets map[string]bool
	stats   stats
}

type stats struct {
	docs, goRefs, flags, targets, tests, blocks, skipped int
	// tutorial counts the blocks a tutorial page runs (make tutorial-check)
	// instead of this check building them.
	tutorial int
}

type problem struct {
	file string
	line int
	msg  string
}

func (p problem) String() string { return fmt.Sprintf("%s:%d: %s", p.file, p.line, p.msg) }

// newChecker loads what the docs are checked against: the packages' type
// information, the binaries' flags and the Makefile's targets.
func newChecker(ctx context.Context, root string) (*checker, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	c := &checker{root: root}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		return nil, err
	}
	c.targets = makeTargets(string(mk))
	// One after the other: on a cold build cache both would compile the
	// same packages at once; after go list -export, go build only links.
	if c.idx, err = loadIndex(ctx, root); err != nil {
		return nil, fmt.Errorf("loading the packages: %w", err)
	}
	if c.bins, err = loadBinaries(ctx, root); err != nil {
		return nil, fmt.Errorf("reading the binaries' flags: %w", err)
	}
	if c.bins.source, err = sourceFlags(root); err != nil {
		return nil, err
	}
	return c, nil
}

// docs lists the files checked, as hack/check-docs.sh does: README.md,
// CHANGELOG.md, docs/*.md and every other README.md, tracked or new (or
// all of them, outside a git checkout).
func docs(root string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "--", "docs/*.md", "*README.md")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		// Not a git checkout: every one.
		var found []string
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			rel = filepath.ToSlash(rel)
			switch {
			case d.IsDir() && strings.HasPrefix(d.Name(), ".") && p != root:
				return filepath.SkipDir
			case !d.IsDir() && (d.Name() == "README.md" || path.Dir(rel) == "docs" && strings.HasSuffix(rel, ".md")):
				found = append(found, rel)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		out = []byte(strings.Join(found, " "))
	}
	seen := map[string]bool{}
	for _, f := range append([]string{"README.md", "CHANGELOG.md"}, strings.Fields(string(out))...) {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			seen[f] = true
		}
	}
	var files []string
	for f := range seen {
		files = append(files, f)
	}
	sort.Strings(files)
	return files, nil
}

// checkTree checks every doc of the repository.
func (c *checker) checkTree() ([]problem, error) {
	files, err := docs(c.root)
	if err != nil {
		return nil, err
	}
	var problems []problem
	for _, f := range files {
		src, err := os.ReadFile(filepath.Join(c.root, f))
		if err != nil {
			return nil, err
		}
		problems = append(problems, c.checkDoc(f, string(src))...)
		switch f {
		case "docs/testing.md":
			for _, t := range undocumentedTargets(c.targets, parseMarkdown(string(src), 1, 0)) {
				problems = append(problems, problem{f, 1, fmt.Sprintf("make target %s is not named here, the page that lists every target (Make targets)", t)})
			}
		case "docs/operations.md":
			for _, k := range undocumentedKeys(c.idx.leaseKeys(), parseMarkdown(string(src), 1, 0)) {
				problems = append(problems, problem{f, 1, fmt.Sprintf("the Lease's %s (a constant of package lease) is not named here, the page that lists a Lease's fields (The Lease of a replica)", k)})
			}
		}
	}
	return problems, nil
}

// checkDoc checks one markdown file; name is its path from the root.
func (c *checker) checkDoc(name, src string) []problem {
	c.stats.docs++
	from, to := 1, 0
	if filepath.Base(name) == "CHANGELOG.md" {
		var ok bool
		if from, to, ok = unreleasedRange(src); !ok {
			return nil
		}
	}
	md := parseMarkdown(src, from, to)
	var problems []problem
	for _, s := range md.spans {
		words := strings.Fields(s.text)
		if len(words) == 0 {
			continue
		}
		if c.isCommand(words) {
			for _, cmd := range shellWords(s.text) {
				for _, msg := range c.checkCommand(cmd, strings.HasPrefix(cmd[0], "-")) {
					problems = append(problems, problem{name, s.line, msg})
				}
			}
			continue
		}
		for _, r := range goRefs(s.text) {
			if r.kind() == "" {
				continue
			}
			c.stats.goRefs++
			msg := c.idx.resolve(r)
			if c.verbose != nil {
				fmt.Fprintf(c.verbose, "%s:%d: %s %s: %s\n", name, s.line, r.kind(), r, orOK(msg))
			}
			if msg != "" {
				problems = append(problems, problem{name, s.line, fmt.Sprintf("Go reference %s: %s", r, msg)})
			}
		}
	}
	for _, b := range md.blocks {
		switch b.info {
		case "go":
			problems = append(problems, c.checkGoBlock(name, b)...)
		case "sh", "bash", "shell", "console", "":
			lines := strings.Split(b.text, "\n")
			for i := 0; i < len(lines); i++ {
				first, l := i, lines[i]
				for strings.HasSuffix(l, "\\") && i+1 < len(lines) {
					i++
					l = strings.TrimSuffix(l, "\\") + " " + lines[i]
				}
				for _, cmd := range shellWords(l) {
					if len(cmd) == 0 {
						continue
					}
					for _, msg := range c.checkCommand(cmd, false) {
						problems = append(problems, problem{name, b.line + first, msg})
					}
				}
			}
		}
	}
	return problems
}

// isCommand reports whether a code span is a command line or a flag
// rather than Go: its first word (after VAR=value) runs a program the
// checks know, or is a flag.
func (c *checker) isCommand(words []string) bool {
	for len(words) > 0 && envAssign.MatchString(words[0]) {
		words = words[1:]
	}
	if len(words) == 0 {
		return true
	}
	w := words[0]
	switch w {
	case "go", "make", "kubectl", "git", "cd", "docker", "podman", "skopeo", "kind", "minikube", "curl", "helm":
		return true
	}
	if w != "" && c.bins.kshard[w] != nil && len(words) > 1 && strings.HasPrefix(words[1], "-") {
		return true // a kshard command without the binary: `status -n ns`
	}
	return strings.HasPrefix(w, "-") || isBinary(w) != "" || strings.HasPrefix(w, "hack/") || strings.HasPrefix(w, "./")
}

func orOK(msg string) string {
	if msg == "" {
		return "ok"
	}
	return msg
}
