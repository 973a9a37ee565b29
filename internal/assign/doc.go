// Package assign computes a ring's assignment, internal to kshard: which
// member owns each partition, by bounded-load consistent hashing
// (github.com/buraksezer/consistent v1.0.0 with an xxhash hasher), refined
// by the partitions' weights in a balanced ring, and the encoding of those
// weights for Lease annotations. Users configure a ring with shard.Config
// and read owners through shard/ringstatus; the handoff core, the Lease
// membership, the ring's status and the simulations build rings here.
//
// It is pure: no I/O, no goroutines, no clocks. Every replica that feeds New
// the same Config and the same member set, in any order, computes the same
// assignment, which is what lets replicas agree on owners without talking.
// Ring keeps the result as a table, so Owner is an array lookup.
//
// # No panics
//
// consistent panics on impossible configurations. New validates the exact
// condition first and returns an error; a recover around the library remains
// only as a last line of defence and converts any panic into a *PlacementError.
package assign
