// Package e2e holds kshard's end-to-end suites: real control planes
// (manager/kshardtest/controlplane), the test operator's replicas as OS processes
// (e2e/harness, e2e/testoperator) and a recorder that proves from their
// records that no key was reconciled twice at once (manager/kshardtest/recorder). The fault
// suite (e2e/chaos) adds crashes, outages and partitions, the latter through
// a per-replica fault proxy (e2e/faultproxy).
package e2e
