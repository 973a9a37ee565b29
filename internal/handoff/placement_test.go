package handoff

import (
	"errors"
	"testing"

	"github.com/kshard/kshard/internal/assign"

	"github.com/kshard/kshard/shard"
)

// A ring is built once per view and weights, and a view the placement
// returns to (membership flapping) is served from the recent rings.
func TestPlacementBuildsEachRingOnce(t *testing.T) {
	builds := 0
	pl := newPlacement(testRing.WithDefaults())
	pl.build = func(cfg shard.Config, members []string, weights assign.Weights) (*assign.Ring, error) {
		builds++
		return assign.NewWeighted(cfg, members, weights)
	}
	for _, tc := range []struct {
		view    []string
		weights assign.Weights
		builds  int
	}{
		{[]string{"a"}, nil, 1},
		{[]string{"a"}, nil, 1},                                 // unchanged
		{[]string{"a", "b"}, nil, 2},                            // a new view
		{[]string{"a"}, nil, 2},                                 // back to a recent one
		{[]string{"a"}, assign.Weights{1, 2, 3, 4, 5, 6, 7}, 3}, // same members, new weights
		{[]string{"c"}, nil, 4},
		{[]string{"d"}, nil, 5},
		{[]string{"a"}, nil, 6}, // the fifth ring since it: forgotten
	} {
		pl.place(tc.view, tc.weights)
		if builds != tc.builds || !pl.usable() {
			t.Fatalf("placing %v %v: %d builds (usable %v); want %d", tc.view, tc.weights, builds, pl.usable(), tc.builds)
		}
		if owner, ok := pl.ring.Owner(0); !ok || len(tc.view) == 1 && owner != tc.view[0] {
			t.Fatalf("placing %v: partition 0 is %q's", tc.view, owner)
		}
	}
}

func TestPlacementKeepsTheRingError(t *testing.T) {
	pl := newPlacement(testRing.WithDefaults())
	failed := errors.New("no")
	pl.build = func(shard.Config, []string, assign.Weights) (*assign.Ring, error) { return nil, failed }
	pl.place([]string{"a"}, nil)
	if pl.usable() || !errors.Is(pl.err, failed) {
		t.Fatalf("usable %v, err %v; want the builder's error", pl.usable(), pl.err)
	}
}

func TestWeightReport(t *testing.T) {
	const p = 7
	b := assign.WeightBucket
	for _, tc := range []struct {
		name    string
		counted []int // nil: never counted
		synced  []int // partitions the count covers
		cache   []int // partitions the cache holds synced now
		view    assign.Weights
		want    assign.Weights
	}{
		{name: "nothing synced: nothing published", counted: []int{5, 5, 5, 5, 5, 5, 5}, synced: []int{0}, want: nil},
		{name: "a counted partition publishes its bucket",
			counted: []int{1000, 0, 0, 0, 0, 0, 0}, synced: []int{0}, cache: []int{0},
			want: assign.Weights{b(1000), 0, 0, 0, 0, 0, 0}},
		{name: "a partition synced since the count carries the view's weight",
			counted: []int{1000, 0, 0, 0, 0, 0, 0}, synced: []int{0}, cache: []int{0, 1},
			view: assign.Weights{0, 9, 0, 0, 0, 0, 0}, want: assign.Weights{b(1000), 9, 0, 0, 0, 0, 0}},
		{name: "a count within the hysteresis of the view's weight confirms it",
			counted: []int{1000, 0, 0, 0, 0, 0, 0}, synced: []int{0}, cache: []int{0},
			view: assign.Weights{b(1000) + 2, 0, 0, 0, 0, 0, 0}, want: assign.Weights{b(1000) + 2, 0, 0, 0, 0, 0, 0}},
		{name: "one beyond it publishes its own",
			counted: []int{1000, 0, 0, 0, 0, 0, 0}, synced: []int{0}, cache: []int{0},
			view: assign.Weights{b(1000) + 3, 0, 0, 0, 0, 0, 0}, want: assign.Weights{b(1000), 0, 0, 0, 0, 0, 0}},
		{name: "view weights of another partition count are ignored",
			counted: []int{1000, 0, 0, 0, 0, 0, 0}, synced: []int{0}, cache: []int{0},
			view: assign.Weights{b(1000) + 1}, want: assign.Weights{b(1000), 0, 0, 0, 0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWeightReport(p)
			if tc.counted != nil {
				w.counted(set(tc.synced...), tc.counted)
			}
			changed := w.update(set(tc.cache...), tc.view)
			if !w.published.Equal(tc.want) || changed != (tc.want != nil) {
				t.Fatalf("published %v (changed %v); want %v", w.published, changed, tc.want)
			}
			if w.update(set(tc.cache...), tc.view) {
				t.Fatal("the same report again counts as a change")
			}
		})
	}
}
