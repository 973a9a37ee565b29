// Command kshardop is the kshard side of the benchmark in e2e/bench: the
// bench reconciler (cache read, simulated latency, one annotation patch) run
// as a sharded replica; e2e/bench/baseline runs the same logic on controller-runtime.
// A module of its own (kshard's, from the checkout, and e2e/bench/benchkit,
// which it shares with the baseline), so that kshard's module requires
// nothing of the benchmark's.
package main
