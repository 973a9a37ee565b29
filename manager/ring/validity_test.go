package ring

import (
	"testing"
	"time"

	"github.com/kshard/kshard/controller"
)

func TestNextValidity(t *testing.T) {
	const rd = 6 * time.Second
	t0 := time.Now()
	old := controller.Validity{Until: t0.Add(rd), Epoch: 5}
	for _, tc := range []struct {
		name     string
		prevSent time.Time
		prevLost bool
		sent     time.Time
		lost     bool
		want     controller.Validity
	}{
		{"no renewal yet", time.Time{}, false, time.Time{}, false, controller.Validity{Epoch: 5}},
		{"first renewal", time.Time{}, false, t0, false, controller.Validity{Until: t0.Add(rd), Epoch: 5}},
		{"renewal within the validity extends it", t0, false, t0.Add(2 * time.Second), false, controller.Validity{Until: t0.Add(2*time.Second + rd), Epoch: 5}},
		{"same renewal, nothing changes", t0, false, t0, false, controller.Validity{Until: t0.Add(rd), Epoch: 5}},
		{"renewal sent after the validity passed starts an epoch", t0, false, t0.Add(rd), false, controller.Validity{Until: t0.Add(2 * rd), Epoch: 6}},
		{"a fence starts an epoch and ends the validity", t0, false, t0, true, controller.Validity{Epoch: 6}},
		{"still fenced: same epoch", t0, true, t0.Add(time.Second), true, controller.Validity{Epoch: 5}},
		{"unfenced by a timely renewal: valid in the fence's epoch", t0, true, t0.Add(time.Second), false, controller.Validity{Until: t0.Add(time.Second + rd), Epoch: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := nextValidity(old, tc.prevSent, tc.prevLost, tc.sent, tc.lost, rd)
			if got.Epoch != tc.want.Epoch || !got.Until.Equal(tc.want.Until) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestNextValidityNeverHeld: a fence before the replica was ever valid
// leaves the zero Validity, so the transport still tells a starting replica
// from one that lost its validity.
func TestNextValidityNeverHeld(t *testing.T) {
	const rd = 6 * time.Second
	t0 := time.Now()
	v := nextValidity(controller.Validity{}, time.Time{}, false, time.Time{}, true, rd)
	if v != (controller.Validity{}) {
		t.Fatalf("fenced before any renewal: got %+v, want the zero Validity", v)
	}
	v = nextValidity(v, time.Time{}, true, t0, true, rd)
	if v.EverHeld() {
		t.Fatalf("renewed while fenced: got %+v, want no validity held yet", v)
	}
	v = nextValidity(v, t0, true, t0.Add(time.Second), false, rd)
	if !v.EverHeld() || !v.Until.Equal(t0.Add(time.Second+rd)) {
		t.Fatalf("unfenced: got %+v, want valid until the renewal plus the renew deadline", v)
	}
	if v = nextValidity(v, t0.Add(time.Second), false, t0.Add(time.Second), true, rd); v.Epoch != 1 || !v.EverHeld() {
		t.Fatalf("fenced after holding a validity: got %+v, want epoch 1, held", v)
	}
}
