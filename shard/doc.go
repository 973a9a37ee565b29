// Package shard is kshard's ring: it maps reconcile keys to partitions, assigns
// partitions to ring members with bounded-load consistent hashing, diffs two
// rings, and encodes partition claims for Lease annotations.
//
// It is pure: no I/O, no goroutines, no clocks. Every replica that feeds New
// the same Config and the same member set, in any order, computes the same
// assignment, which is what lets replicas agree on owners without talking.
//
// # Keys, partitions and members
//
// A key ("namespace/name", or "name" for cluster-scoped objects; see KeyOf)
// maps to a partition with xxhash64(key) mod Partitions. Partitions, not keys,
// are the unit of ownership and handoff. Partition→member assignment is done
// once per ring by github.com/buraksezer/consistent v1.0.0 with an xxhash
// hasher; Ring keeps the result as a table, so Owner is an array lookup.
//
// # Compatibility
//
// Config.Fingerprint names every parameter that changes the assignment,
// including a version for the hash scheme. Replicas whose fingerprints differ
// would disagree about owners and must refuse to form a ring together.
//
// # No panics
//
// consistent panics on impossible configurations. New validates the exact
// condition first and returns an error; a recover around the library remains
// only as a last line of defence and converts any panic into a *PlacementError.
package shard
