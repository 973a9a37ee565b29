// Command kshardop is the kshard side of the benchmark in e2e/bench: the
// bench reconciler (cache read, simulated latency, one annotation patch) run
// as a sharded replica; e2e/bench/baseline runs the same logic on controller-runtime.
package main
