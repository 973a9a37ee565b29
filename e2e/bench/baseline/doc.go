// Command baseline is the controller-runtime side of the benchmark in e2e/bench: the
// same reconciler as e2e/bench/kshardop on a leader-elected controller-runtime manager,
// in its own module so that kshard never depends on controller-runtime.
package main
