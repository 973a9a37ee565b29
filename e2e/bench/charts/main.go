package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// charts are the PNGs e2e/bench/RESULTS.md shows, by file name.
var charts = []struct {
	file string
	draw func(*results) (figure, error)
}{
	{"throughput.png", func(r *results) (figure, error) { return throughputChart(r) }},
	{"rss.png", rssChart},
	{"handoff.png", func(r *results) (figure, error) { return handoffChart(r) }},
}

func main() {
	in := flag.String("results", "../results.json", "the bench's results.json (the default suits a run from e2e/bench/charts)")
	out := flag.String("out", "..", "directory for the PNGs, beside RESULTS.md")
	flag.Parse()
	if err := run(*in, *out, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "charts: %v\n", err)
		os.Exit(1)
	}
}

// run draws every chart from the results.json at in into the directory
// out, naming each file it writes on log.
func run(in, out string, log io.Writer) error {
	r, err := readResults(in)
	if err != nil {
		return err
	}
	for _, c := range charts {
		p, err := c.draw(r)
		if err != nil {
			return fmt.Errorf("%s: %w", c.file, err)
		}
		path := filepath.Join(out, c.file)
		if err := savePNG(p, path); err != nil {
			return fmt.Errorf("%s: %w", c.file, err)
		}
		fmt.Fprintln(log, path)
	}
	return nil
}
