// Package ring runs one replica's membership in a kshard ring: the
// Coordinator is the I/O shell around the pure handoff core
// (internal/handoff), fed by the ring's Leases (the Lease membership of a
// Replica, from NewReplica) and carrying out what the core decides through
// the Participants (gates to open and drain), a sharded cache
// (PartitionCache) and proofs of death read from the kubelet's pod status.
//
// It imports controller (for the lease validity it publishes), lease, shard
// and internal/handoff, never manager: kshard's manager runs a Coordinator, and
// so does any other runtime that drives the same ring (the controller-runtime
// adapter, controller/crshard). The deterministic simulation
// (internal/handoffsim) steps the same coordinator on its own clock and
// scheduler (TestCoordinatorSimulation).
package ring
