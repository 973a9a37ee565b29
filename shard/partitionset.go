package shard

import (
	"fmt"
	"iter"
	"math/bits"
	"strconv"
	"strings"
)

// PartitionSet is a fixed-size bitset over the partitions [0, Size()).
//
// Like a slice, a PartitionSet value refers to shared storage: a copy made by
// assignment sees the other's Add and Remove. Call Clone before mutating a set
// that someone else holds. Union, Intersect and Difference never mutate.
// The zero value is an empty set of size 0.
type PartitionSet struct {
	size  int
	words []uint64
}

// NewPartitionSet returns a set of the given size holding members. A size
// below 0 is taken as 0 and one above MaxPartitions as MaxPartitions, so that
// no input can make it allocate without bound. A member outside
// [0, partitions) panics, as Add does.
func NewPartitionSet(partitions int, members ...int) PartitionSet {
	partitions = min(max(partitions, 0), MaxPartitions)
	s := PartitionSet{size: partitions, words: make([]uint64, wordsFor(partitions))}
	for _, p := range members {
		s.Add(p)
	}
	return s
}

// FullPartitionSet returns the set of every partition in [0, partitions),
// with the size clamped as in NewPartitionSet.
func FullPartitionSet(partitions int) PartitionSet {
	s := NewPartitionSet(partitions)
	for i := range s.words {
		s.words[i] = ^uint64(0)
	}
	s.clearTail()
	return s
}

func wordsFor(partitions int) int { return (partitions + 63) / 64 }

// clearTail zeroes the bits at and beyond size in the last word, which every
// operation relies on (Len and Equal read whole words).
func (s *PartitionSet) clearTail() {
	if r := s.size % 64; r != 0 {
		s.words[len(s.words)-1] &= (uint64(1) << r) - 1
	}
}

// Size returns the number of partitions the set ranges over (P).
func (s PartitionSet) Size() int { return s.size }

// Len returns how many partitions are in the set.
func (s PartitionSet) Len() int {
	n := 0
	for _, w := range s.words {
		n += bits.OnesCount64(w)
	}
	return n
}

// IsEmpty reports whether the set holds no partition.
func (s PartitionSet) IsEmpty() bool {
	for _, w := range s.words {
		if w != 0 {
			return false
		}
	}
	return true
}

// Has reports whether p is in the set; p outside [0, Size()) is never in it.
func (s PartitionSet) Has(p int) bool {
	// One unsigned comparison rejects both negative p and p >= size.
	if uint(p) >= uint(s.size) {
		return false
	}
	return s.words[p>>6]&(uint64(1)<<(uint(p)&63)) != 0
}

// Add puts p into the set. The size of a set is the ring's partition count
// and never grows, so a p outside [0, Size()) is a programming error (a set
// built at another count, or a partition not checked against the ring's)
// and panics: ignoring it once hid a cache that had dropped every object of
// a partition it was about to hold. Check input with Has or Size first.
func (s *PartitionSet) Add(p int) {
	s.mustHold(p, "Add")
	s.words[p>>6] |= uint64(1) << (uint(p) & 63)
}

// Remove takes p out of the set. A p outside [0, Size()) panics, as in Add.
func (s *PartitionSet) Remove(p int) {
	s.mustHold(p, "Remove")
	s.words[p>>6] &^= uint64(1) << (uint(p) & 63)
}

// mustHold panics when p is outside [0, Size()).
func (s PartitionSet) mustHold(p int, op string) {
	// One unsigned comparison rejects both negative p and p >= size.
	if uint(p) >= uint(s.size) {
		panic(fmt.Sprintf("shard: PartitionSet.%s(%d) on a set of %d partitions: a programming error; build every set with the ring's partition count and check partitions from input against it", op, p, s.size))
	}
}

// Clone returns a copy that shares no storage with s.
func (s PartitionSet) Clone() PartitionSet {
	return PartitionSet{size: s.size, words: append([]uint64(nil), s.words...)}
}

// Union returns s ∪ o. Both sets must range over the same partitions; the
// zero value (size 0) stands for an empty set of any size. Sets of two other
// sizes panic: they come from rings of different partition counts, and
// combining them would silently drop or invent partitions.
func (s PartitionSet) Union(o PartitionSet) PartitionSet {
	return combine(s, o, func(a, b uint64) uint64 { return a | b })
}

// Intersect returns s ∩ o, with sizes as in Union.
func (s PartitionSet) Intersect(o PartitionSet) PartitionSet {
	return combine(s, o, func(a, b uint64) uint64 { return a & b })
}

// Difference returns s \ o, with sizes as in Union.
func (s PartitionSet) Difference(o PartitionSet) PartitionSet {
	return combine(s, o, func(a, b uint64) uint64 { return a &^ b })
}

// combine applies op word by word, reading the words of a zero-size set as
// zero. Its result keeps the tail clear because op(0, 0) is 0 for every op
// used and both inputs have clear tails.
func combine(s, o PartitionSet, op func(a, b uint64) uint64) PartitionSet {
	if s.size != o.size && s.size != 0 && o.size != 0 {
		panic(fmt.Sprintf("shard: combining a set of %d partitions with one of %d: a programming error; build every set with the ring's partition count", s.size, o.size))
	}
	out := NewPartitionSet(max(s.size, o.size))
	for i := range out.words {
		var a, b uint64
		if i < len(s.words) {
			a = s.words[i]
		}
		if i < len(o.words) {
			b = o.words[i]
		}
		out.words[i] = op(a, b)
	}
	return out
}

// Equal reports whether s and o have the same size and the same members.
func (s PartitionSet) Equal(o PartitionSet) bool {
	if s.size != o.size {
		return false
	}
	for i, w := range s.words {
		if o.words[i] != w {
			return false
		}
	}
	return true
}

// All yields the partitions in the set in ascending order.
func (s PartitionSet) All() iter.Seq[int] {
	return func(yield func(int) bool) {
		for i, w := range s.words {
			for w != 0 {
				p := i*64 + bits.TrailingZeros64(w)
				if !yield(p) {
					return
				}
				w &= w - 1
			}
		}
	}
}

// Slice returns the partitions in the set in ascending order.
func (s PartitionSet) Slice() []int {
	out := make([]int, 0, s.Len())
	for p := range s.All() {
		out = append(out, p)
	}
	return out
}

// String returns the set in the compact form of Linux cpu lists, runs of
// consecutive partitions collapsed: "{0-3,7,9}"; "{}" when empty.
func (s PartitionSet) String() string {
	var b strings.Builder
	b.WriteByte('{')
	first, last := -1, -1
	flush := func() {
		if first < 0 {
			return
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(first))
		if last > first {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(last))
		}
	}
	for p := range s.All() {
		if p == last+1 && first >= 0 {
			last = p
			continue
		}
		flush()
		first, last = p, p
	}
	flush()
	b.WriteByte('}')
	return b.String()
}
