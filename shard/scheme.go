package shard

import "fmt"

// Scheme names how a ring maps objects to partitions. It is part of Config
// and of its Fingerprint: replicas with different schemes refuse to share a
// ring, exactly as replicas with different partition counts do.
type Scheme string

const (
	// SchemeKey is kshard's own partition function, xxhash64(key) mod P over
	// the request key "namespace/name". The API server cannot filter by it,
	// so every replica caches every object. It is the default.
	SchemeKey Scheme = "key"

	// SchemeNamespace makes partition p the p-th of P contiguous ranges of the
	// API server's 64-bit FNV-1a hash of metadata.namespace (see
	// RangePartitioner for the exact bounds). An object, its owned objects and
	// every request mapped within its namespace share a partition, so one
	// shard selector filters every source of a controller. All objects of a
	// namespace, and all cluster-scoped objects (namespace ""), land in one
	// partition each.
	SchemeNamespace Scheme = "namespace"

	// SchemeUID is as SchemeNamespace over metadata.uid: one namespace
	// spreads over every partition, but the partition belongs to an object,
	// not to its key. A name deleted and created again gets a new UID and may
	// land in another partition, and an owned object is routed by its owner's
	// UID, which the server cannot filter on. See the package documentation
	// ("Sharding by the API server's hash") for the invariant that holds.
	SchemeUID Scheme = "uid"
)

// field returns the object field the API server hashes for s, as the shard
// selector names it ("object.metadata.namespace", "object.metadata.uid"), or
// "" for SchemeKey, which the server cannot select on.
func (s Scheme) field() string {
	switch s {
	case SchemeNamespace:
		return fieldNamespace
	case SchemeUID:
		return fieldUID
	}
	return ""
}

// Ranged reports whether s partitions the API server's hash space into
// ranges, so that a set of partitions can be turned into a shard selector.
func (s Scheme) Ranged() bool { return s == SchemeNamespace || s == SchemeUID }

// MaxPartitions returns the largest partition count s supports: MaxPartitions
// for SchemeKey; for the ranged schemes, the largest P whose worst-case shard
// selector (every other partition, so no two ranges merge) fits the API
// server's limit of 100,000 characters: MaxNamespacePartitions and
// MaxUIDPartitions. It returns 0 for an unknown scheme.
func (s Scheme) MaxPartitions() int {
	switch s {
	case SchemeKey:
		return MaxPartitions
	case SchemeNamespace:
		return MaxNamespacePartitions
	case SchemeUID:
		return MaxUIDPartitions
	}
	return 0
}

func (s Scheme) validate() error {
	switch s {
	case SchemeKey, SchemeNamespace, SchemeUID:
		return nil
	}
	return &ConfigError{
		Field: "Scheme", Value: fmt.Sprintf("%q", string(s)),
		Reason: fmt.Sprintf("must be %q, %q or %q; leave it empty for the default %q", SchemeKey, SchemeNamespace, SchemeUID, SchemeKey),
	}
}
