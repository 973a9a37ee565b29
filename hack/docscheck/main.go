// Command docscheck fails when the docs name what the code does not have.
// `make docs-check` (part of `make test`) runs it after hack/check-docs.sh,
// which checks the README's length and the relative links.
//
// It reads README.md, docs/*.md, every other README.md and the [Unreleased]
// section of CHANGELOG.md (a released version's section is history and may
// name what is gone), and checks in their code spans and fenced blocks:
//
//   - Go references: `pkg.Name`, `pkg.Type.Member`, `Type.Member`, and a
//     lone name written as a call or literal (`Name(…)`, `Name{}`) must
//     exist in the packages of the workspace's modules (go.work: the root,
//     controller/crshard, e2e/bench/crshardop) or the packages they import,
//     read as the compiler sees them (export data from go list -export);
//     `pkg` is a package's name, a directory (shard/cache.X), the name the
//     repository's files import a package under (ctrl, corev1), or a
//     variable named after its type (ring for a *crshard.Ring). Test names
//     (TestX, BenchmarkX*) must be test functions.
//   - Flags: `kshard CMD --flag`, `kubectl shard CMD --flag` and
//     `example-operator --flag`, in spans and in sh blocks, against what the
//     built binaries' --help lists for that command; a span that is a flag
//     alone (`--ring NAME`) against every binary's flags and the flags the
//     repository's other commands define.
//   - Make targets: `make TARGET` against the Makefile; and docs/testing.md,
//     the page that lists them, must name every target.
//   - go test -run and -bench patterns that name tests.
//   - ```go blocks are type-checked (see checkGoBlock): a file as it is, a
//     fragment with a prelude in an HTML comment above its fence for what
//     it leaves undeclared; <!-- docs-check: skip: why --> skips one, and
//     a tutorial page's blocks (<!-- docs-check: tutorial … -->) are built
//     by make tutorial-check instead, from the script -tutorial prints.
//
// With a warm build cache it takes a few seconds; cold, as long as
// building the workspace.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	verbose := flag.Bool("v", false, "list every Go reference checked")
	tutorial := flag.String("tutorial", "", "instead of checking, print the bash script that runs this tutorial page (its <!-- docs-check: tutorial … --> blocks)")
	version := flag.String("version", "", "with -tutorial: the version to require kshard at where the page says v0.1.0")
	flag.Parse()
	if *tutorial != "" {
		src, err := os.ReadFile(*tutorial)
		if err == nil {
			var script string
			if script, err = tutorialScript(*tutorial, string(src), *version); err == nil {
				_, err = os.Stdout.WriteString(script)
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "docscheck: %v\n", err)
			os.Exit(2)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	c, err := newChecker(ctx, *root)
	if err != nil {
		fmt.Fprintf(os.Stderr, "docscheck: %v\n", err)
		os.Exit(2)
	}
	if *verbose {
		c.verbose = os.Stdout
	}
	problems, err := c.checkTree()
	if err != nil {
		fmt.Fprintf(os.Stderr, "docscheck: %v\n", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Fprintf(os.Stderr, "docs-check: %s\n", p)
	}
	s := c.stats
	summary := fmt.Sprintf("%d docs: %d Go references, %d flags, %d make targets, %d test patterns, %d Go blocks built (%d skipped, %d left to make tutorial-check), in %s",
		s.docs, s.goRefs, s.flags, s.targets, s.tests, s.blocks, s.skipped, s.tutorial, time.Since(start).Round(100*time.Millisecond))
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "docs-check: %d problems in %s\n", len(problems), summary)
		os.Exit(1)
	}
	fmt.Printf("docs-check: the docs match the code: %s\n", summary)
}
