// Package gate is the shard gate of a controller: one atomic word per
// partition holding "revoked" and the partition's in-flight reconcile count,
// so that admitting a reconcile and revoking its partition are ordered by a
// single compare-and-swap, plus the allocation-free key-to-partition and
// object-to-partition functions used on the event path (xxhash of the key,
// or the API server's FNV-1a hash ranges of the namespace or UID).
//
// It imports only shard. kshard's controllers and other runtimes' adapters
// (controller/crshard) import it to gate their queues the same way.
package gate
