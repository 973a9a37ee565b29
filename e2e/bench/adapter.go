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

// changedLines counts the lines the adapter conversion added plus removed,
// as `git diff --no-index --numstat` reports them.
func changedLines(ctx context.Context, root string) (int, error) {
	cmd := exec.CommandContext(ctx, "git", "diff", "--no-index", "--numstat",
		filepath.Join(root, conversionFiles[0]), filepath.Join(root, conversionFiles[1]))
	out, err := cmd.Output()
	// --no-index exits 1 when the files differ.
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
		err = nil
	}
	if err != nil {
		return 0, fmt.Errorf("git diff --numstat %s %s: %w", conversionFiles[0], conversionFiles[1], err)
	}
	return parseNumstat(out)
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
