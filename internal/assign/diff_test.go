package assign

import (
	"maps"
	"slices"
	"testing"

	"github.com/kshard/kshard/shard"
)

func TestDiffAccountsForEveryMovedPartition(t *testing.T) {
	old := mustRing(t, shard.Config{}, statefulSetNames("kshard", 5))
	grown := mustRing(t, shard.Config{}, statefulSetNames("kshard", 6))
	changes := ringDiff(old, grown)

	if got := len(changes); got != 6 {
		t.Fatalf("Diff has %d members, want 6 (union of both rings)", got)
	}
	gained, lost := 0, 0
	for m, c := range changes {
		before, after := old.Partitions(m), grown.Partitions(m)
		if !c.Gained.Equal(after.Difference(before)) || !c.Lost.Equal(before.Difference(after)) {
			t.Fatalf("%s: change %v/%v does not match the rings", m, c.Gained, c.Lost)
		}
		if !c.Gained.Intersect(c.Lost).IsEmpty() {
			t.Fatalf("%s both gains and loses %v", m, c.Gained.Intersect(c.Lost))
		}
		gained += c.Gained.Len()
		lost += c.Lost.Len()
	}
	moved := movedPartitions(old, grown)
	if gained != moved || lost != moved {
		t.Fatalf("gained %d, lost %d, but %d partitions changed owner", gained, lost, moved)
	}
	if changes["kshard-5"].Lost.Len() != 0 || !changes["kshard-5"].Gained.Equal(grown.Partitions("kshard-5")) {
		t.Fatal("the new member must gain exactly what it owns and lose nothing")
	}
}

func TestDiffEdges(t *testing.T) {
	r := mustRing(t, shard.Config{Partitions: 31}, []string{"a", "b"})
	tests := []struct {
		name       string
		old, new   *Ring
		wantGained map[string]int
		wantLost   map[string]int
	}{
		{"nil to ring: all gained", nil, r, map[string]int{"a": r.Partitions("a").Len(), "b": r.Partitions("b").Len()}, map[string]int{"a": 0, "b": 0}},
		{"ring to nil: all lost", r, nil, map[string]int{"a": 0, "b": 0}, map[string]int{"a": r.Partitions("a").Len(), "b": r.Partitions("b").Len()}},
		{"same ring: nothing", r, r, map[string]int{"a": 0, "b": 0}, map[string]int{"a": 0, "b": 0}},
		{"both nil", nil, nil, map[string]int{}, map[string]int{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changes := ringDiff(tt.old, tt.new)
			if len(changes) != len(tt.wantGained) {
				t.Fatalf("Diff has members %v, want %d", slices.Collect(maps.Keys(changes)), len(tt.wantGained))
			}
			for m, c := range changes {
				if c.Gained.Len() != tt.wantGained[m] || c.Lost.Len() != tt.wantLost[m] {
					t.Errorf("%s: gained %d lost %d, want %d and %d", m, c.Gained.Len(), c.Lost.Len(), tt.wantGained[m], tt.wantLost[m])
				}
				if c.Gained.Size() != 31 || c.Lost.Size() != 31 {
					t.Errorf("%s: sets sized %d/%d, want the ring's 31", m, c.Gained.Size(), c.Lost.Size())
				}
			}
		})
	}
	if gained := ringDiff(nil, r)["a"].Gained; !gained.Equal(r.Partitions("a")) {
		t.Errorf("nil→ring: a gains %v, owns %v", gained, r.Partitions("a"))
	}
}
