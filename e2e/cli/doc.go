// Package cli holds the end-to-end tests of the kshard command line: the
// binary is built once, then run as a user would run it, against a real
// control plane (manager/kshardtest/controlplane) and real example-operator replicas
// started through its hidden command. The tests check what the CLI prints
// against what actually happened: `kshard owner` must name the replica that
// reconciled the object, and `kshard demo` must converge, hand off and exit
// cleanly, leaving no process behind.
package cli
