// Package handoffsim is the deterministic simulation of kshard's partition
// handoff: a simulated world (an API server with one ordered log of Lease
// writes, processes with drifting clocks, lagging and stalling watches,
// failing and late-landing writes, controllers whose reconciles take time
// to drain, crashes, pauses, partitions from the API server, membership
// flapping and third-party Lease edits, and, against two of the core's
// assumptions, clocks at different rates and stale views of peers' Leases;
// sharded caches, by LISTs or by labels: see Options), driven by one seeded
// PRNG and one event queue, so that a seed replays exactly.
//
// Each process runs a handoff.Core behind a shell. The built-in shell feeds
// the core directly (internal/handoff's TestSimulation); an external Shell,
// such as the real ring coordinator (shard/ring's
// TestCoordinatorSimulation), sees the process as a Lease membership, a
// participant and a pod reader (for proofs of death), and runs its
// asynchronous work as tasks the world schedules one at a time.
//
// It is test support: only tests import it.
package handoffsim
