package handoff

import (
	"slices"
	"testing"
)

// What Ready asks for is asked for again until Advance acknowledges it, as
// long as it still holds.
func TestUnacked(t *testing.T) {
	ref := func(id string) LeaseRef { return LeaseRef{Identity: id, Version: "1"} }
	for _, tc := range []struct {
		name             string
		asked            Ready
		ack              Ready
		active, draining []int
		awaited          []string // identities whose confirm is still awaited
		again            Ready    // the next Ready, asking for nothing new
	}{
		{name: "nothing acknowledged: all asked again",
			asked:  Ready{Activate: set(1), Revoke: set(2), Fence: true, Exit: true, DeleteLease: true, Confirm: []LeaseRef{ref("b")}},
			active: []int{1}, draining: []int{2}, awaited: []string{"b"},
			again: Ready{Activate: set(1), Revoke: set(2), Fence: true, Exit: true, DeleteLease: true, Confirm: []LeaseRef{ref("b")}}},
		{name: "all acknowledged: nothing again",
			asked:  Ready{Activate: set(1), Revoke: set(2), Fence: true, Exit: true, DeleteLease: true, Confirm: []LeaseRef{ref("b")}},
			ack:    Ready{Activate: set(1), Revoke: set(2), Fence: true, Exit: true, DeleteLease: true, Confirm: []LeaseRef{ref("b")}},
			active: []int{1}, draining: []int{2}, awaited: []string{"b"},
			again: Ready{Activate: set(), Revoke: set()}},
		{name: "part acknowledged: the rest again",
			asked:  Ready{Activate: set(1, 3), Revoke: set(2, 4), Confirm: []LeaseRef{ref("b"), ref("c")}},
			ack:    Ready{Activate: set(3), Revoke: set(4), Confirm: []LeaseRef{ref("c")}},
			active: []int{1, 3}, draining: []int{2, 4}, awaited: []string{"b", "c"},
			again: Ready{Activate: set(1), Revoke: set(2), Confirm: []LeaseRef{ref("b")}}},
		{name: "what no longer holds is not asked again",
			asked:  Ready{Activate: set(1), Revoke: set(2), Confirm: []LeaseRef{ref("b")}},
			active: []int{}, draining: []int{},
			again: Ready{Activate: set(), Revoke: set()}},
		{name: "a confirm asked twice is asked once",
			asked:   Ready{Activate: set(), Revoke: set(), Confirm: []LeaseRef{ref("b"), ref("b")}},
			awaited: []string{"b"},
			again:   Ready{Activate: set(), Revoke: set(), Confirm: []LeaseRef{ref("b")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUnacked(testRing.Partitions)
			awaited := func(r LeaseRef) bool { return slices.Contains(tc.awaited, r.Identity) }
			first := tc.asked
			u.merge(&first, set(tc.active...), set(tc.draining...), awaited)
			u.ack(tc.ack)
			next := Ready{Activate: set(), Revoke: set()}
			u.merge(&next, set(tc.active...), set(tc.draining...), awaited)
			w := tc.again
			if !next.Activate.Equal(w.Activate) || !next.Revoke.Equal(w.Revoke) || next.Fence != w.Fence || next.Exit != w.Exit ||
				next.DeleteLease != w.DeleteLease || !slices.Equal(next.Confirm, w.Confirm) {
				t.Fatalf("asked again: activate %v revoke %v fence %v exit %v delete %v confirm %v; want %v %v %v %v %v %v",
					next.Activate, next.Revoke, next.Fence, next.Exit, next.DeleteLease, next.Confirm,
					w.Activate, w.Revoke, w.Fence, w.Exit, w.DeleteLease, w.Confirm)
			}
		})
	}
}
