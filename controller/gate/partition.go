package gate

import (
	"github.com/cespare/xxhash/v2"

	"github.com/kshard/kshard/shard"
)

// Partitions maps a request's namespace and name to its partition exactly as
// p.Partition(shard.KeyOf(namespace, name)) would, and an object (namespace,
// name, UID) to the partition p's scheme places it in, without building the
// key string when p is one of shard's own partitioners.
type Partitions struct {
	p      shard.Partitioner
	n      uint64
	fast   bool
	ranges shard.RangePartitioner
	ranged bool
}

// NewPartitions wraps p. The allocation-free path is taken only when p is
// the partitioner shard.NewPartitioner returns for p's own count, or a
// shard.RangePartitioner (or a pointer to one); any other Partitioner is called as it is, with the
// key string built per event.
func NewPartitions(p shard.Partitioner) Partitions {
	n := p.Count()
	rp, ranged := p.(shard.RangePartitioner)
	if ptr, ok := p.(*shard.RangePartitioner); ok && ptr != nil {
		rp, ranged = *ptr, true
	}
	if ranged {
		return Partitions{p: p, n: uint64(max(n, 1)), fast: true, ranges: rp, ranged: true}
	}
	// Interface equality holds only for the same dynamic type and value, so
	// this is true for shard's own xxhash-mod-n and nothing else. It cannot
	// panic: shard's partitioner type is comparable, and interfaces holding
	// different dynamic types are unequal before any value is compared.
	fast := n > 0 && p == shard.NewPartitioner(n)
	return Partitions{p: p, n: uint64(max(n, 1)), fast: fast}
}

// isFast reports whether the allocation-free path is in use.
func (ps Partitions) isFast() bool { return ps.fast }

// Count is the number of partitions.
func (ps Partitions) Count() int { return ps.p.Count() }

// scheme is the scheme of the wrapped partitioner: the RangePartitioner's,
// else shard.SchemeKey (a foreign Partitioner is taken as keyed).
func (ps Partitions) scheme() shard.Scheme {
	if ps.ranged {
		return ps.ranges.Scheme()
	}
	return shard.SchemeKey
}

// Of returns the partition of the request namespace/name. Under
// shard.SchemeUID that is the key's stand-in partition (see
// shard.RangePartitioner.Partition), not where its object lives: route
// objects with ofObject.
func (ps Partitions) Of(namespace, name string) int {
	switch {
	case ps.ranged:
		return ps.ranges.PartitionOfKey(namespace, name)
	case !ps.fast:
		return ps.p.Partition(shard.KeyOf(namespace, name))
	}
	return int(hashKey(namespace, name) % ps.n)
}

// ofObject returns the partition of the object namespace/name whose
// metadata.uid is uid, as the ring's scheme places it: by its key under
// shard.SchemeKey (and for foreign partitioners), by the hash range of its
// namespace or UID under the ranged schemes, which is where the API server's
// sharded list/watch puts it. Under shard.SchemeUID an empty uid has no
// partition and ofObject returns -1, which no gate admits.
func (ps Partitions) ofObject(namespace, name, uid string) int {
	if !ps.ranged {
		return ps.Of(namespace, name)
	}
	p, _ := ps.ranges.PartitionOfObject(namespace, uid)
	return p
}

// stackKey is the longest key hashed from a copy on the stack: a namespace
// (at most 63 bytes), the separator and an object name (at most 253 bytes)
// fit, so every key the API server accepts takes this path. Keys of up to
// shortKey bytes, the common case, use a smaller buffer, which is cheaper
// to zero.
const (
	shortKey = 64
	stackKey = 320
)

// hashKey is xxhash64 of shard.KeyOf(namespace, name), computed without
// building the key string on the heap.
func hashKey(namespace, name string) uint64 {
	if namespace == "" {
		return xxhash.Sum64String(name)
	}
	switch n := len(namespace) + 1 + len(name); {
	case n <= shortKey:
		var buf [shortKey]byte
		return xxhash.Sum64(join(buf[:], namespace, name))
	case n <= stackKey:
		var buf [stackKey]byte
		return xxhash.Sum64(join(buf[:], namespace, name))
	}
	// Longer than any valid name: stream the three parts through a digest,
	// which stays on the stack too.
	var d xxhash.Digest
	d.Reset()
	_, _ = d.WriteString(namespace)
	_, _ = d.WriteString("/")
	_, _ = d.WriteString(name)
	return d.Sum64()
}

// join writes namespace/name into buf, which must be long enough, and
// returns the written part.
func join(buf []byte, namespace, name string) []byte {
	i := copy(buf, namespace)
	buf[i] = '/'
	j := copy(buf[i+1:], name)
	return buf[:i+1+j]
}
