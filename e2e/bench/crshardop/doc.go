// Command crshardop is the benchmark's controller-runtime baseline
// (e2e/bench/baseline) converted to kshard's controller-runtime adapter
// (controller/crshard): the same reconciler and controller, sharded across
// every replica instead of run by one leader. main.go is the baseline's,
// changed only by the conversion, so `git diff --no-index --numstat
// e2e/bench/baseline/main.go e2e/bench/crshardop/main.go` counts it (the
// docs/adapter.md shows how to see the diff). Its own module, like the baseline's, so that
// kshard never depends on controller-runtime.
package main
