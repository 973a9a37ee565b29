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
