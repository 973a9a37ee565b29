// Package compat holds the measurements `make compat` (hack/compat.sh) takes
// on each Kubernetes version of its matrix, beside the suites it runs there
// (lease, ring, labels-mode cache, chaos, adapter chaos). The generated
// RESULTS.md and its per-version blocks (v1.MINOR.md) live here too.
package compat
