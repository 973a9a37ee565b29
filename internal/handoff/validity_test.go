package handoff

import (
	"testing"
	"time"
)

func TestNextValidity(t *testing.T) {
	const rd = 6 * time.Second
	t0 := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		name     string
		prevSent time.Time
		prevLost bool
		sent     time.Time
		lost     bool
		want     Validity
	}{
		{"no renewal yet", time.Time{}, false, time.Time{}, false, Validity{Epoch: 5}},
		{"first renewal", time.Time{}, false, t0, false, Validity{Until: t0.Add(rd), Epoch: 5}},
		{"renewal within the validity extends it", t0, false, t0.Add(2 * time.Second), false, Validity{Until: t0.Add(2*time.Second + rd), Epoch: 5}},
		{"same renewal, nothing changes", t0, false, t0, false, Validity{Until: t0.Add(rd), Epoch: 5}},
		{"renewal sent after the validity passed starts an epoch", t0, false, t0.Add(rd), false, Validity{Until: t0.Add(2 * rd), Epoch: 6}},
		{"a fence starts an epoch and ends the validity", t0, false, t0, true, Validity{Epoch: 6}},
		{"still fenced: same epoch", t0, true, t0.Add(time.Second), true, Validity{Epoch: 5}},
		{"still fenced, renewal after a lapse: new epoch", t0, true, t0.Add(rd), true, Validity{Epoch: 6}},
		{"unfenced by a timely renewal: valid in the fence's epoch", t0, true, t0.Add(time.Second), false, Validity{Until: t0.Add(time.Second + rd), Epoch: 5}},
		{"done before any renewal: an epoch ends", time.Time{}, false, time.Time{}, true, Validity{Epoch: 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev := validityState{Validity: Validity{Until: tc.prevSent.Add(rd), Epoch: 5}, sent: tc.prevSent, lost: tc.prevLost}
			got := nextValidity(prev, tc.sent, tc.lost, rd)
			if got.Epoch != tc.want.Epoch || !got.Until.Equal(tc.want.Until) {
				t.Fatalf("got %+v, want %+v", got.Validity, tc.want)
			}
		})
	}
}

// The core's validity follows its renewals and its fences: a fence ends
// it and starts an epoch, a timely renewal after the fence makes it valid
// again in that epoch, and a renewal after a gap (which fences in the
// same step) starts one epoch, not two.
func TestCoreValidityFollowsRenewalsAndFences(t *testing.T) {
	h := activeAlone(t, "a")
	if v := h.c.Validity(); v.Epoch != 0 || !v.Until.Equal(h.now.Add(testDeadline)) {
		t.Fatalf("active: validity %+v; want until %v in epoch 0", v, h.now.Add(testDeadline))
	}
	h.advance(testDeadline)
	if r := h.c.Ready(h.now); !r.Fence {
		t.Fatal("not fenced at the deadline")
	}
	if v := h.c.Validity(); v.Epoch != 1 || !v.Until.IsZero() {
		t.Fatalf("fenced: validity %+v; want none, epoch 1", v)
	}
	h.c.Drained(h.c.Draining())
	sent := h.now.Add(-time.Second) // sent within RenewDeadline of the previous one
	h.c.RenewSucceeded(sent)
	h.c.Ready(h.now)
	if v := h.c.Validity(); v.Epoch != 1 || !v.Until.Equal(sent.Add(testDeadline)) || h.c.Fenced() {
		t.Fatalf("renewed in time after the fence: validity %+v fenced %v; want until %v in epoch 1", v, h.c.Fenced(), sent.Add(testDeadline))
	}
	h.now = sent.Add(testDeadline + time.Second)
	h.c.RenewSucceeded(h.now) // sent after the validity passed
	if r := h.c.Ready(h.now); !r.Fence {
		t.Fatal("a renewal after a gap did not fence")
	}
	if v := h.c.Validity(); v.Epoch != 2 || !v.Until.IsZero() {
		t.Fatalf("renewal after a gap: validity %+v; want none, epoch 2", v)
	}
}

// TestNextValidityNeverHeld: a fence before the replica was ever valid
// leaves the zero Validity, so the client transport still tells a starting
// replica from one that lost its validity.
func TestNextValidityNeverHeld(t *testing.T) {
	const rd = 6 * time.Second
	t0 := time.Unix(1_700_000_000, 0)
	s := nextValidity(validityState{}, time.Time{}, true, rd)
	if s.Validity != (Validity{}) {
		t.Fatalf("fenced before any renewal: got %+v, want the zero Validity", s.Validity)
	}
	if s = nextValidity(s, t0, true, rd); s.EverHeld() {
		t.Fatalf("renewed while fenced: got %+v, want no validity held yet", s.Validity)
	}
	if s = nextValidity(s, t0.Add(time.Second), false, rd); !s.EverHeld() || !s.Until.Equal(t0.Add(time.Second+rd)) {
		t.Fatalf("unfenced: got %+v, want valid until the renewal plus the renew deadline", s.Validity)
	}
	if s = nextValidity(s, t0.Add(time.Second), true, rd); s.Epoch != 1 || !s.EverHeld() {
		t.Fatalf("fenced after holding a validity: got %+v, want epoch 1, held", s.Validity)
	}
}
