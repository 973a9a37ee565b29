package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Names of the three systems in results.
const (
	nativeName  = "kshard"
	adapterName = "adapter"
)

// conversionFiles are the converted operator's own Go file and the
// baseline it was converted from: the conversion is their difference.
var conversionFiles = [2]string{"e2e/bench/baseline/main.go", "e2e/bench/crshardop/main.go"}

// kubebuilderConversion are the two copies of the operator in kubebuilder's
// layout (e2e/bench/crshardop/kubebuilder): as scaffolded, and converted
// the way docs/adapter.md documents for that layout. The conversion is the
// difference of their Go files.
var kubebuilderConversion = [2]string{"e2e/bench/crshardop/kubebuilder/baseline", "e2e/bench/crshardop/kubebuilder/converted"}

// changedLines counts the lines the adapter conversion added plus removed,
// as `git diff --no-index --numstat` reports them.
func changedLines(ctx context.Context, root string) (int, error) {
	out, err := diffNumstat(ctx, root, conversionFiles)
	if err != nil {
		return 0, err
	}
	return parseNumstat(out)
}

// changedLinesKubebuilder counts the Go lines the conversion of the
// operator in kubebuilder's layout added plus removed, as `git diff
// --no-index --numstat` between the two copies' directories reports them.
// The copies share one module, so the import of internal/controller in
// cmd/main.go differs between them: two of the lines counted, which a
// project converted in place does not change.
func changedLinesKubebuilder(ctx context.Context, root string) (int, error) {
	out, err := diffNumstat(ctx, root, kubebuilderConversion)
	if err != nil {
		return 0, err
	}
	return parseNumstat(goFilesOnly(out))
}

// diffNumstat runs `git diff --no-index --numstat` between the paths
// (files or directories) under root.
func diffNumstat(ctx context.Context, root string, paths [2]string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", "diff", "--no-index", "--numstat",
		filepath.Join(root, paths[0]), filepath.Join(root, paths[1]))
	out, err := cmd.Output()
	// --no-index exits 1 when the files differ.
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
		err = nil
	}
	if err != nil {
		return nil, fmt.Errorf("git diff --numstat %s %s: %w", paths[0], paths[1], err)
	}
	return out, nil
}

// goFilesOnly keeps the lines of git's --numstat output that are about a
// Go file: one whose path, on either side ("a => b", "{a => b}/c.go",
// "/dev/null => b.go"), ends in .go.
func goFilesOnly(numstat []byte) []byte {
	var out []byte
	for line := range bytes.Lines(numstat) {
		f := strings.Fields(string(line))
		if len(f) < 3 {
			continue
		}
		for _, p := range f[2:] {
			if strings.HasSuffix(p, ".go") {
				out = append(out, line...)
				break
			}
		}
	}
	return out
}

// parseNumstat sums added and removed lines of every file in git's
// --numstat output ("added<TAB>removed<TAB>path" per line).
func parseNumstat(out []byte) (int, error) {
	total := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 {
			continue
		}
		for _, n := range f[:2] {
			v, err := strconv.Atoi(n)
			if err != nil {
				return 0, fmt.Errorf("numstat line %q: %w", sc.Text(), err)
			}
			total += v
		}
	}
	return total, sc.Err()
}
