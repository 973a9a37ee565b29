// Command charts draws the benchmark's charts — throughput.png, rss.png and
// handoff.png, which e2e/bench/RESULTS.md shows — from e2e/bench/results.json
// with gonum.org/v1/plot (`make charts`). It is a module of its own so that
// the kshard module carries no plotting dependency; it reads results.json
// with structs of its own rather than importing the bench.
package main
