package ring

import "github.com/kshard/kshard/shard"

// PartitionCache is a cache that holds the objects of some partitions only:
// the sharded cache built on the API server's sharded list and watch
// (shard/README.md; shard/cache's Cache, and its Segmented for one
// resource). The coordinator tells it which partitions this replica needs
// and activates a gained partition only once the cache reports it synced,
// so an activation's replay never misses an object that the cache has not
// listed yet (claim-before-act and synced-before-act).
//
// A nil PartitionCache means a full cache: every partition counts as synced
// once the controllers' caches have synced.
type PartitionCache interface {
	// Hold sets the partitions whose objects must be listed and watched:
	// the replica's target, claimed, active and draining partitions. It
	// returns at once; listing and watching happen in the background.
	// Objects of partitions left out may leave the cache.
	Hold(partitions shard.PartitionSet)
	// SyncedPartitions returns the held partitions whose objects are
	// listed and watched now. A slow or failing LIST keeps a partition
	// out; it must never be reported synced before every object of it is
	// in the cache.
	SyncedPartitions() shard.PartitionSet
	// Changed receives a value (never blocking the cache: a buffered
	// channel of one, or closed-and-replaced) whenever SyncedPartitions
	// may have changed.
	Changed() <-chan struct{}
}

// objectCounter is a PartitionCache that counts the objects it holds per
// partition (a slice indexed by partition): what a balanced ring
// (shard.Config.Balance) is placed by. shard/cache's Cache implements it.
type objectCounter interface {
	ObjectsPerPartition() []int
}

// activeObserver is a PartitionCache that is told, after every step of the
// coordinator, which partitions are active here: a cache sharded by labels
// labels the unlabelled objects of those partitions (shard/cache's
// Cache.SetActive).
type activeObserver interface {
	SetActive(active shard.PartitionSet)
}
