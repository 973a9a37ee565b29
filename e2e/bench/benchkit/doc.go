// Package benchkit is what the benchmark's three operators share: the
// bench debug server that reports their live heap (heap.go), BenchObject,
// the custom resource of ConfigMap shape (benchobject.go), and the kinds
// they reconcile (kind.go). e2e/bench/baseline, e2e/bench/kshardop and
// e2e/bench/crshardop import it; the harness in e2e/bench does not, since
// it belongs to kshard's module, so it keeps the debug server's name and
// the CRD of its own, and its tests check that they agree with these.
//
// A module of its own that imports neither kshard nor controller-runtime:
// the baseline must import nothing of kshard, and kshard's operator
// nothing of controller-runtime.
package benchkit
