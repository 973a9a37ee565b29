// Package shard is what a user configures and reads of kshard's ring: its
// Config (partitions, load, scheme), the timings of a replica (Timing), how
// reconcile keys map to partitions (Partitioner, KeyOf, RangePartitioner),
// sets of partitions (PartitionSet), the partition label of the sharded
// cache, and the lease validity a reconcile runs under (Validity). The
// assignment of partitions to members, which every replica computes from
// the same Config and member set, is internal to kshard.
//
// It is pure: no I/O, no goroutines, no clocks.
//
// # Keys, partitions and members
//
// A key ("namespace/name", or "name" for cluster-scoped objects; see KeyOf)
// maps to a partition with xxhash64(key) mod Partitions. Partitions, not keys,
// are the unit of ownership and handoff. Partition→member assignment is done
// once per ring by github.com/buraksezer/consistent v1.0.0 with an xxhash
// hasher, bounded by Config.Load and refined by the partitions' object
// counts when Config.Balance is set.
//
// # Sharding by the API server's hash
//
// Config.Scheme chooses the partition function. SchemeKey (the default) is
// the one above. SchemeNamespace and SchemeUID make partition p the p-th of P
// contiguous ranges of the 64-bit FNV-1a hash the API server computes for
// metadata.namespace or metadata.uid (Kubernetes 1.36 sharded list/watch,
// KEP-5866): with w = floor(2^64/P), partition p is [p×w, (p+1)×w) and the
// last one absorbs the remainder, up to 2^64 (RangePartitioner). A set of
// partitions — a replica's target ∪ claimed ∪ draining — then becomes one
// shard selector (RangePartitioner.Selector), adjacent ranges merged, that
// the server filters LIST and WATCH by. Its length caps P at
// MaxNamespacePartitions (2352) and MaxUIDPartitions (2530); Validate
// enforces it.
//
// The invariant depends on the scheme:
//
//   - SchemeKey and SchemeNamespace: a key's partition is a function of the
//     key (the namespace is part of it), so no key is reconciled by two
//     replicas at once. Under SchemeNamespace every object of a namespace,
//     its owner and what maps to it within the namespace share one
//     partition, so one selector filters every source of a controller.
//   - SchemeUID: the partition belongs to an object incarnation (its UID),
//     not to its key. The invariant is per object: no UID is reconciled by
//     two replicas at once. A name deleted and created again gets a new UID
//     and may land in another partition, so the old and the new incarnation
//     of one key may be reconciled at the same time on two replicas;
//     reconcilers must key side effects by UID (or use UID preconditions).
//     Requests are admitted by their object's UID, owned objects by their
//     controller owner's UID, and a request whose UID is unknown is admitted
//     nowhere (RangePartitioner.PartitionOfObject returns ok=false).
//
// README.md ("Sharding by the API server's hash") has the details: what the
// server does and does not echo, the selector's size limit, and the balance
// of namespace hashing.
//
// # Compatibility
//
// Config.Fingerprint names every parameter that changes the assignment,
// including a version for the hash scheme and the Scheme (as a suffix
// "-snamespace" or "-suid"; default rings keep their old fingerprint). Replicas whose fingerprints differ
// would disagree about owners and must refuse to form a ring together.
package shard
