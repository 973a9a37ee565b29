package handoff

import (
	"testing"
	"time"
)

func TestHandover(t *testing.T) {
	const timeout = 5 * time.Second
	for _, tc := range []struct {
		name       string
		timeout    time.Duration
		ringUsable bool
		listing    bool          // the new owner is still listing the partition
		at         time.Duration // since the partition left the target
		kept       bool
	}{
		{"kept while the new owner lists it", timeout, true, true, timeout - time.Millisecond, true},
		{"handed over once the new owner's cache holds it", timeout, true, false, 0, false},
		{"handed over at the timeout", timeout, true, true, timeout, false},
		{"handed over at once without a ring", timeout, false, true, 0, false},
		{"handed over at once with the wait turned off", -1, true, true, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHandover(tc.timeout, testRing.Partitions)
			listing := func(p int) bool { return p == 1 && tc.listing }
			keptAtOnce := tc.timeout > 0 && tc.ringUsable && tc.listing
			if got := h.revoke(t0, set(1), tc.ringUsable, listing); got.Has(1) == keptAtOnce {
				t.Fatalf("at once: revoked %v; want kept %v", got, keptAtOnce)
			}
			got := h.revoke(t0.Add(tc.at), set(1), tc.ringUsable, listing)
			if kept := !got.Has(1); kept != tc.kept {
				t.Fatalf("after %v: kept %v; want %v", tc.at, kept, tc.kept)
			}
			if kept := h.pending.Has(1); kept != tc.kept {
				t.Fatalf("pending %v; want kept %v", h.pending, tc.kept)
			}
		})
	}
}

// A partition back in the target, then leaving again, waits afresh.
func TestHandoverRestartsForAPartitionThatCameBack(t *testing.T) {
	h := newHandover(5*time.Second, testRing.Partitions)
	listing := func(int) bool { return true }
	h.revoke(t0, set(1), true, listing)
	h.revoke(t0.Add(4*time.Second), set(), true, listing) // back in the target
	if got := h.revoke(t0.Add(6*time.Second), set(1), true, listing); got.Has(1) {
		t.Fatal("the wait did not restart when the partition left the target again")
	}
	var next []time.Time
	h.nextDeadline(func(at time.Time) { next = append(next, at) })
	if len(next) != 1 || !next[0].Equal(t0.Add(11*time.Second)) {
		t.Fatalf("next deadline %v; want +11s", next)
	}
}
