// Package e2e holds kshard's own end-to-end suites, built on the public test
// kit (manager/kshardtest): real control planes (its controlplane), the test
// operator's replicas as OS processes (e2e/harness, e2e/testoperator), and
// the kit's recorder, which proves from their records that no key was
// reconciled twice at once. The fault suite (e2e/chaos) adds crashes,
// outages and partitions, the latter through a per-replica fault proxy
// (e2e/faultproxy). No production package imports anything here.
package e2e
