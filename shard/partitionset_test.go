package shard

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestPartitionSetMembership(t *testing.T) {
	s := NewPartitionSet(130, 0, 63, 64, 129)
	if s.Size() != 130 {
		t.Fatalf("Size() = %d, want 130", s.Size())
	}
	if got, want := s.Slice(), []int{0, 63, 64, 129}; !slices.Equal(got, want) {
		t.Fatalf("Slice() = %v, want %v", got, want)
	}
	if s.Len() != 4 || s.IsEmpty() {
		t.Fatalf("Len() = %d, IsEmpty() = %v; want 4, false", s.Len(), s.IsEmpty())
	}
	for _, p := range []int{-1, 130, 1 << 40, -1 << 40} {
		if s.Has(p) {
			t.Errorf("Has(%d) = true for out-of-range partition", p)
		}
	}
	s.Remove(63)
	s.Add(1)
	if got, want := s.Slice(), []int{0, 1, 64, 129}; !slices.Equal(got, want) || s.Size() != 130 {
		t.Fatalf("after Add/Remove: %v size %d, want %v size 130", got, s.Size(), want)
	}
}

// mustPanic runs f and fails unless it panics with a message holding want.
func mustPanic(t *testing.T, name, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		msg, _ := r.(string)
		if r == nil || !strings.Contains(msg, want) {
			t.Errorf("%s: recovered %v, want a panic naming %q", name, r, want)
		}
	}()
	f()
}

// An out-of-range partition or a mix of sizes is a programming error that
// once hid a cache built at the wrong count: it must be loud, and the set
// it was aimed at must stay as it was.
func TestPartitionSetMisuseIsLoud(t *testing.T) {
	s := NewPartitionSet(130, 5)
	for _, p := range []int{130, 200, -1, -3, 1 << 40} {
		mustPanic(t, fmt.Sprintf("Add(%d)", p), "PartitionSet.Add", func() { s.Add(p) })
		mustPanic(t, fmt.Sprintf("Remove(%d)", p), "PartitionSet.Remove", func() { s.Remove(p) })
	}
	mustPanic(t, "NewPartitionSet with 130 in 130", "PartitionSet.Add(130)", func() { NewPartitionSet(130, 0, 130) })
	var zero PartitionSet
	mustPanic(t, "Add on the zero value", "set of 0 partitions", func() { zero.Add(0) })
	other := NewPartitionSet(271, 5)
	mustPanic(t, "Union of 130 and 271", "combining a set of 130 partitions with one of 271", func() { s.Union(other) })
	mustPanic(t, "Intersect of 271 and 130", "combining a set of 271 partitions with one of 130", func() { other.Intersect(s) })
	mustPanic(t, "Difference of 130 and 271", "combining", func() { s.Difference(other) })
	if got := s.Slice(); !slices.Equal(got, []int{5}) || s.Size() != 130 {
		t.Fatalf("misuse changed the set: %v size %d", got, s.Size())
	}
}

func TestPartitionSetZeroValue(t *testing.T) {
	var s PartitionSet
	if s.Size() != 0 || s.Len() != 0 || !s.IsEmpty() || s.Has(0) || s.String() != "{}" || len(s.Slice()) != 0 {
		t.Fatalf("zero value misbehaves: size %d len %d %s", s.Size(), s.Len(), s)
	}
	if !s.Equal(NewPartitionSet(0)) {
		t.Fatal("zero value is not equal to NewPartitionSet(0)")
	}
}

func TestPartitionSetSizeIsClamped(t *testing.T) {
	if got := NewPartitionSet(-7).Size(); got != 0 {
		t.Errorf("NewPartitionSet(-7).Size() = %d, want 0", got)
	}
	if got := NewPartitionSet(1 << 40).Size(); got != MaxPartitions {
		t.Errorf("NewPartitionSet(1<<40).Size() = %d, want %d", got, MaxPartitions)
	}
}

func TestFullPartitionSet(t *testing.T) {
	for _, p := range []int{0, 1, 63, 64, 65, 271} {
		s := FullPartitionSet(p)
		if s.Len() != p || s.Size() != p {
			t.Errorf("FullPartitionSet(%d): Len %d Size %d", p, s.Len(), s.Size())
		}
		if s.Has(p) {
			t.Errorf("FullPartitionSet(%d) has partition %d", p, p)
		}
	}
}

func TestPartitionSetCloneIsIndependentAndCopiesAlias(t *testing.T) {
	a := NewPartitionSet(10, 1)
	alias := a
	clone := a.Clone()
	alias.Add(2)
	clone.Add(3)
	if !a.Has(2) {
		t.Error("a copy by assignment should share storage (documented)")
	}
	if a.Has(3) {
		t.Error("Clone shares storage with the original")
	}
}

func TestPartitionSetAlgebra(t *testing.T) {
	tests := []struct {
		name               string
		a, b               PartitionSet
		union, inter, diff []int
		wantSize           int
	}{
		{"disjoint", NewPartitionSet(8, 0, 1), NewPartitionSet(8, 5), []int{0, 1, 5}, []int{}, []int{0, 1}, 8},
		{"overlap", NewPartitionSet(8, 0, 1, 2), NewPartitionSet(8, 2, 3), []int{0, 1, 2, 3}, []int{2}, []int{0, 1}, 8},
		{"across words", NewPartitionSet(200, 3, 70, 199), NewPartitionSet(200, 70, 130), []int{3, 70, 130, 199}, []int{70}, []int{3, 199}, 200},
		{"with zero value", NewPartitionSet(8, 4), PartitionSet{}, []int{4}, []int{}, []int{4}, 8},
		{"zero value first", PartitionSet{}, NewPartitionSet(8, 4), []int{4}, []int{}, []int{}, 8},
		{"equal", NewPartitionSet(8, 4), NewPartitionSet(8, 4), []int{4}, []int{4}, []int{}, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.a.Clone()
			for _, c := range []struct {
				op   string
				got  PartitionSet
				want []int
			}{
				{"Union", tt.a.Union(tt.b), tt.union},
				{"Intersect", tt.a.Intersect(tt.b), tt.inter},
				{"Difference", tt.a.Difference(tt.b), tt.diff},
			} {
				if !slices.Equal(c.got.Slice(), c.want) || c.got.Size() != tt.wantSize {
					t.Errorf("%s = %v size %d, want %v size %d", c.op, c.got.Slice(), c.got.Size(), c.want, tt.wantSize)
				}
			}
			if !tt.a.Equal(before) {
				t.Errorf("operations mutated the receiver: %v -> %v", before, tt.a)
			}
		})
	}
}

func TestPartitionSetEqual(t *testing.T) {
	tests := []struct {
		name string
		a, b PartitionSet
		want bool
	}{
		{"same members", NewPartitionSet(10, 1, 9), NewPartitionSet(10, 9, 1), true},
		{"different members", NewPartitionSet(10, 1), NewPartitionSet(10, 2), false},
		{"different sizes", NewPartitionSet(10, 1), NewPartitionSet(11, 1), false},
		{"empty of equal size", NewPartitionSet(10), NewPartitionSet(10), true},
	}
	for _, tt := range tests {
		if got := tt.a.Equal(tt.b); got != tt.want {
			t.Errorf("%s: Equal = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestPartitionSetString(t *testing.T) {
	tests := []struct {
		set  PartitionSet
		want string
	}{
		{NewPartitionSet(10), "{}"},
		{NewPartitionSet(10, 5), "{5}"},
		{NewPartitionSet(10, 0, 1, 2, 3, 7, 9), "{0-3,7,9}"},
		{NewPartitionSet(10, 4, 5), "{4-5}"},
		{NewPartitionSet(130, 62, 63, 64, 65, 129), "{62-65,129}"},
		{FullPartitionSet(271), "{0-270}"},
	}
	for _, tt := range tests {
		if got := tt.set.String(); got != tt.want {
			t.Errorf("String() of %v = %q, want %q", tt.set.Slice(), got, tt.want)
		}
	}
}

// The set must agree with a plain map under any sequence of operations.
func TestPartitionSetMatchesMapModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const size = 271
	s := NewPartitionSet(size)
	model := map[int]bool{}
	for range 5000 {
		p := rng.IntN(size)
		if rng.IntN(2) == 0 {
			s.Add(p)
			model[p] = true
		} else {
			s.Remove(p)
			delete(model, p)
		}
		if s.Len() != len(model) || s.Has(p) != model[p] {
			t.Fatalf("after op on %d: Len %d Has %v, model %d %v", p, s.Len(), s.Has(p), len(model), model[p])
		}
	}
	for _, p := range s.Slice() {
		if !model[p] {
			t.Fatalf("Slice has %d, model does not", p)
		}
	}
}
