// Package chaos holds kshard's e2e fault suite: replicas of the test operator
// as OS processes on a real control plane, under crashes, restarts, outages,
// partitions, flapping and slow reconcilers, with records checked for overlap.
package chaos
