package chaos

import (
	"testing"
	"time"

	"github.com/kshard/kshard/e2e/harness"
)

// TestMembershipFlapping has a third replica join and leave every few
// seconds beside two stable ones (A→AB→A over and over), mostly gracefully,
// sometimes by SIGKILL, often before it has finished joining.
func TestMembershipFlapping(t *testing.T) {
	scenario(t, "flap", func(r *round) {
		h := r.harness(harness.Options{})
		writer := h.StartWriter(h.CreateConfigMaps(200), 40)
		stable := identities(2)
		h.StartReady(stable...)
		r.converge(h)

		flapper := harness.Identity(2)
		flaps := 6 + r.rng.IntN(4)
		for range flaps {
			h.Start(flapper)
			r.pause(500*time.Millisecond, 4*time.Second)
			if r.rng.IntN(4) == 0 {
				r.kill(h, flapper)
			} else {
				r.stop(h, flapper)
			}
			r.faults++
			r.pause(0, 2*time.Second)
		}
		r.t.Logf("after %d flaps: ring converged: %s", flaps, r.converge(h))
		r.finish(h, writer)
	})
}
