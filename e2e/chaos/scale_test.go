package chaos

import (
	"testing"
	"time"

	"github.com/kshard/kshard/e2e/harness"
)

// TestScaleOneToSixToOne scales the ring from one replica to six, starting
// them at random intervals, and back to one, stopping them at random
// intervals from the top.
func TestScaleOneToSixToOne(t *testing.T) {
	scenario(t, "scale", func(r *round) {
		h := r.harness(harness.Options{})
		opts := h.Options()
		writer := h.StartWriter(h.CreateConfigMaps(200), 40)
		ids := identities(6)
		h.StartReady(ids[0])
		r.converge(h)

		for _, id := range ids[1:] {
			r.pause(0, 1500*time.Millisecond)
			h.Start(id)
			r.faults++
		}
		for _, id := range ids[1:] {
			h.WaitReady(id)
		}
		r.t.Logf("scaled to 6: ring converged: %s", r.converge(h))

		for i := len(ids) - 1; i >= 1; i-- {
			r.pause(0, 1500*time.Millisecond)
			r.stop(h, ids[i])
			r.faults++
		}
		ring := r.converge(h)
		r.t.Logf("scaled to 1: ring converged: %s", ring)
		if got := ring.Members[ids[0]].Claim.Len(); got != opts.Partitions {
			r.t.Errorf("the last replica claims %d partitions, want all %d", got, opts.Partitions)
		}
		r.finish(h, writer)
	})
}
