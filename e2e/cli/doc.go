// Package cli holds the end-to-end tests of the kshard command line: the
// binary and the example operator are built once, side by side (where
// `kshard demo` finds the operator), then run as a user would run them,
// against a real control plane (manager/kshardtest/controlplane). The tests check what the CLI prints
// against what actually happened: `kshard owner` must name the replica that
// reconciled the object, and `kshard demo` must converge, hand off and exit
// cleanly, leaving no process behind.
package cli
