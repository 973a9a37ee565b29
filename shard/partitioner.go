package shard

import "github.com/cespare/xxhash/v2"

// Partitioner maps request keys to partitions. It is fixed for a ring and
// involves no members. It is an interface so that another partition function
// can replace kshard's own: RangePartitioner places objects as the API
// server's sharded list/watch does (see PartitionerFor).
type Partitioner interface {
	// Partition returns the partition of key, in [0, Count()).
	Partition(key string) int
	// Count returns the number of partitions.
	Count() int
}

// PartitionerFor returns the partition function of cfg's Scheme:
// NewPartitioner(cfg.Partitions) for SchemeKey, a RangePartitioner for the
// ranged schemes. It fails when cfg does not validate.
func PartitionerFor(cfg Config) (Partitioner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	if cfg.Scheme.Ranged() {
		return newRangePartitioner(cfg.Scheme, cfg.Partitions), nil
	}
	return newModPartitioner(cfg.Partitions), nil
}

// NewPartitioner returns the kshard partition function: xxhash64(key) mod
// partitions. Pass a validated Config's Partitions; a value below 1 means
// DefaultPartitions, as it does in Config, so Partition never divides by zero.
func NewPartitioner(partitions int) Partitioner {
	return newModPartitioner(partitions)
}

// modPartitioner is xxhash64 mod n, the partition function of SchemeKey.
type modPartitioner struct {
	n uint64
}

func newModPartitioner(partitions int) modPartitioner {
	if partitions < 1 {
		partitions = DefaultPartitions
	}
	return modPartitioner{n: uint64(partitions)}
}

func (m modPartitioner) Partition(key string) int {
	return int(xxhash.Sum64String(key) % m.n)
}

func (m modPartitioner) Count() int { return int(m.n) }

// KeyOf returns the key of a reconcile request: "namespace/name", or "name"
// for a cluster-scoped object (namespace == ""). It matches client-go's
// cache.MetaNamespaceKeyFunc, so keys read the same in logs and in the CLI.
func KeyOf(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// SingletonKey is the ring key of the singleton named name: a Runnable
// that must run on one replica at a time runs where the partition of this
// key is active, as a reconcile of it would (kshard's manager and the
// controller-runtime adapter both place singletons by it).
func SingletonKey(name string) string { return "singleton/" + name }
