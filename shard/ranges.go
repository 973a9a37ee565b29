package shard

import (
	"errors"
	"fmt"
	"math/bits"
	"strings"
)

const (
	// fieldNamespace and fieldUID are the object fields the API server's
	// sharded list/watch hashes, spelled as its shard selector spells them.
	fieldNamespace = "object.metadata.namespace"
	fieldUID       = "object.metadata.uid"

	// maxSelectorLength is the longest shard selector the API server accepts,
	// in characters. Kubernetes 1.36 parses ListOptions.ShardSelector with
	// k8s.io/apiserver/pkg/sharding.Parse, which builds a cel-go parser
	// without a size option, so cel-go's default ExpressionSizeCodePointLimit
	// of 100,000 code points applies (selectors are ASCII: one code point per
	// byte). A longer selector is refused with 400 Bad Request.
	maxSelectorLength = 100_000

	// MaxNamespacePartitions and MaxUIDPartitions are the largest P of
	// SchemeNamespace and SchemeUID whose worst-case selector fits in
	// maxSelectorLength. The worst case is every other partition: no two
	// ranges merge, so ceil(P/2) ranges of 81 (namespace) or 75 (uid)
	// characters, joined by " || ", one of them ending at 2^64 with a 17th
	// hex digit: 85×ceil(P/2)−3 resp. 79×ceil(P/2)−3 characters.
	// worstCaseSelectorLength computes it; a test checks these constants
	// against selectors actually built.
	MaxNamespacePartitions = 2352
	MaxUIDPartitions       = 2530
)

// ErrNoPartitions is returned for a selector of an empty partition set. The
// API server reads an empty selector as "everything", so there is no
// selector that selects nothing: the caller must not list or watch at all.
var ErrNoPartitions = errors.New("shard: no partitions to select; an empty shard selector would select every object, so do not list or watch")

// HashRange is the inclusive range [First, Last] of the 64-bit hash space.
// Inclusive bounds make the range ending at 2^64−1 expressible; its
// exclusive end, 2^64, is what the selector's '0x10000000000000000' means.
type HashRange struct {
	First, Last uint64
}

// contains reports whether h lies in the range.
func (r HashRange) contains(h uint64) bool { return r.First <= h && h <= r.Last }

// serverHash is the hash the API server's sharded list/watch computes for a
// field value: 64-bit FNV-1a over its bytes (k8s.io/apimachinery/pkg/sharding
// HashField renders the same number as 16 hex digits). It does not allocate.
func serverHash(value string) uint64 {
	return fnvAdd(fnvOffset64, value)
}

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// fnvAdd continues an FNV-1a hash h over s. FNV-1a is byte-serial, so
// fnvAdd(fnvAdd(offset, a), b) is the hash of a+b without building it.
func fnvAdd(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime64
	}
	return h
}

// RangePartitioner is the partition function of SchemeNamespace and
// SchemeUID. Partition p of P is the p-th of P contiguous ranges of the hash
// space: with w = floor(2^64 / P),
//
//	partition p = [p×w, (p+1)×w)     for p < P−1
//	partition P−1 = [(P−1)×w, 2^64)  (it absorbs the remainder 2^64 mod P < P)
//
// so the partition of hash h is min(h / w, P−1). For P = 1 the one partition
// is the whole space. The bounds are part of the wire contract between
// replicas, named by Config.Fingerprint through hashScheme.
type RangePartitioner struct {
	scheme Scheme
	n      uint64
	width  uint64 // floor(2^64 / n); 0 when n == 1
}

// NewRangePartitioner returns the partition function of a ranged scheme over
// partitions partitions. It fails for SchemeKey, an unknown scheme, or a
// count outside [1, scheme.MaxPartitions()].
func NewRangePartitioner(scheme Scheme, partitions int) (RangePartitioner, error) {
	if !scheme.Ranged() {
		return RangePartitioner{}, fmt.Errorf("shard: scheme %q does not partition the API server's hash space; use %q or %q", scheme, SchemeNamespace, SchemeUID)
	}
	if err := (Config{Partitions: partitions, Scheme: scheme}).Validate(); err != nil {
		return RangePartitioner{}, err
	}
	return newRangePartitioner(scheme, partitions), nil
}

// newRangePartitioner assumes a validated scheme and count.
func newRangePartitioner(scheme Scheme, partitions int) RangePartitioner {
	r := RangePartitioner{scheme: scheme, n: uint64(partitions)}
	if partitions > 1 {
		// 2^64 / n as a 128-by-64-bit division; the quotient fits since n > 1.
		r.width, _ = bits.Div64(1, 0, r.n)
	}
	return r
}

// Scheme returns the partitioner's scheme.
func (r RangePartitioner) Scheme() Scheme { return r.scheme }

// field returns the object field whose hash places an object.
func (r RangePartitioner) Field() string { return r.scheme.field() }

// Count returns the number of partitions.
func (r RangePartitioner) Count() int { return int(r.n) }

// partitionOfHash returns the partition whose range contains h.
func (r RangePartitioner) partitionOfHash(h uint64) int {
	if r.width == 0 {
		return 0
	}
	return int(min(h/r.width, r.n-1))
}

// partitionOfValue returns the partition of a field value: the range
// containing serverHash(value).
func (r RangePartitioner) partitionOfValue(value string) int {
	return r.partitionOfHash(serverHash(value))
}

// PartitionOfObject returns the partition of an object with this namespace
// and UID, as the API server places it. Under SchemeUID an empty uid (an
// object not yet created, or a request whose UID is unknown) has no
// partition: ok is false, and the caller must not admit or route by it.
func (r RangePartitioner) PartitionOfObject(namespace, uid string) (p int, ok bool) {
	if r.scheme == SchemeUID {
		if uid == "" {
			return -1, false
		}
		return r.partitionOfValue(uid), true
	}
	return r.partitionOfValue(namespace), true
}

// Partition returns the partition of a request key, to satisfy Partitioner.
// Under SchemeNamespace it is exact: the key's namespace (the text before
// '/', "" for a cluster-scoped key) decides, as for its object. Under
// SchemeUID a key does not determine an object's partition; Partition then
// places the key by serverHash of the key itself, which is deterministic on
// every replica and right for keys that name no API object (a singleton's),
// but is NOT where the key's object lives: route objects and requests with
// PartitionOfObject.
func (r RangePartitioner) Partition(key string) int {
	if r.scheme == SchemeUID {
		return r.partitionOfValue(key)
	}
	return r.partitionOfValue(namespaceOfKey(key))
}

// PartitionOfKey returns Partition(KeyOf(namespace, name)) without building
// the key, so it does not allocate.
func (r RangePartitioner) PartitionOfKey(namespace, name string) int {
	if r.scheme != SchemeUID {
		return r.partitionOfValue(namespace)
	}
	if namespace == "" {
		return r.partitionOfValue(name)
	}
	return r.partitionOfHash(fnvAdd(fnvAdd(fnvAdd(fnvOffset64, namespace), "/"), name))
}

// namespaceOfKey returns the namespace part of a KeyOf key: namespaces and
// names contain no '/', so the first '/' separates them, and a key without
// one is cluster-scoped.
func namespaceOfKey(key string) string {
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[:i]
	}
	return ""
}

// rangeOf returns partition p's hash range. ok is false for p outside [0, P).
func (r RangePartitioner) rangeOf(p int) (hr HashRange, ok bool) {
	if p < 0 || uint64(p) >= r.n {
		return HashRange{}, false
	}
	if r.width == 0 {
		return HashRange{First: 0, Last: ^uint64(0)}, true
	}
	hr.First = uint64(p) * r.width
	if uint64(p) == r.n-1 {
		hr.Last = ^uint64(0)
	} else {
		hr.Last = hr.First + r.width - 1
	}
	return hr, true
}

// Ranges returns the hash ranges of set, adjacent partitions merged into one
// range, in ascending order. The set must range over Count() partitions.
func (r RangePartitioner) Ranges(set PartitionSet) ([]HashRange, error) {
	if set.Size() != r.Count() {
		return nil, fmt.Errorf("shard: the partition set covers %d partitions but the ring has %d; build the set with the ring's partition count", set.Size(), r.Count())
	}
	var out []HashRange
	for p := range set.All() {
		hr, _ := r.rangeOf(p)
		if n := len(out); n > 0 && out[n-1].Last+1 == hr.First && hr.First != 0 {
			out[n-1].Last = hr.Last
			continue
		}
		out = append(out, hr)
	}
	return out, nil
}

// Selector returns the API server shard selector matching exactly the
// objects of the partitions in set (a replica's target ∪ claimed ∪ draining),
// adjacent partitions merged into one range:
//
//	shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(...)
//
// It is written in the canonical form the server echoes in
// ListMeta.ShardInfo.Selector, so a response can be compared with it as a
// string. An empty set returns ErrNoPartitions: no selector selects nothing.
// For P ≤ Scheme().MaxPartitions() the result never exceeds the API
// server's limit of 100,000 characters.
func (r RangePartitioner) Selector(set PartitionSet) (string, error) {
	ranges, err := r.Ranges(set)
	if err != nil {
		return "", err
	}
	if len(ranges) == 0 {
		return "", ErrNoPartitions
	}
	field := r.Field()
	buf := make([]byte, 0, len(ranges)*(rangeLength(field)+len(orSeparator))+1)
	for i, hr := range ranges {
		if i > 0 {
			buf = append(buf, orSeparator...)
		}
		buf = append(buf, "shardRange("...)
		buf = append(buf, field...)
		buf = append(buf, ", '"...)
		buf = appendHex(buf, hr.First)
		buf = append(buf, "', '"...)
		if hr.Last == ^uint64(0) {
			buf = append(buf, hashSpaceEnd...)
		} else {
			buf = appendHex(buf, hr.Last+1)
		}
		buf = append(buf, "')"...)
	}
	return string(buf), nil
}

const (
	orSeparator = " || "
	// hashSpaceEnd is 2^64, the exclusive end of the last range; the only
	// bound the server accepts with 17 hex digits.
	hashSpaceEnd = "0x10000000000000000"
)

// rangeLength is the length of one shardRange term whose end has 16 digits.
func rangeLength(field string) int {
	return len("shardRange(") + len(field) + len(", '0x0123456789abcdef', '0x0123456789abcdef')")
}

// worstCaseSelectorLength returns the length of the longest selector Selector
// can return for a ranged scheme over partitions partitions: every other
// partition, including the last, so ceil(P/2) unmerged ranges, one of them
// ending at 2^64. It returns 0 for SchemeKey or P < 1.
func worstCaseSelectorLength(scheme Scheme, partitions int) int {
	if !scheme.Ranged() || partitions < 1 {
		return 0
	}
	k := (partitions + 1) / 2
	return k*rangeLength(scheme.field()) + (k-1)*len(orSeparator) + 1
}

// appendHex appends v as the server writes hash bounds: "0x" and 16
// lowercase hex digits.
func appendHex(buf []byte, v uint64) []byte {
	const digits = "0123456789abcdef"
	buf = append(buf, '0', 'x')
	for shift := 60; shift >= 0; shift -= 4 {
		buf = append(buf, digits[(v>>uint(shift))&0xf])
	}
	return buf
}
