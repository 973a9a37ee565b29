package chaos

import (
	"testing"
	"time"

	"github.com/kshard/kshard/e2e/harness"
)

// TestRollingRestart restarts every replica one by one, highest identity
// first and under the same identity, as a StatefulSet rolls out. Each
// graceful leave must hand its partitions off in less than a LeaseDuration.
func TestRollingRestart(t *testing.T) {
	scenario(t, "rolling", func(r *round) {
		h := r.harness(harness.Options{})
		opts := h.Options()
		writer := h.StartWriter(h.CreateConfigMaps(200), 40)
		ids := identities(3 + r.rng.IntN(2))
		r.startFleet(h, ids...)
		r.converge(h)

		for i := len(ids) - 1; i >= 0; i-- {
			r.pause(0, 2*time.Second)
			exit := r.stop(h, ids[i])
			r.faults++
			gap := awaitTakeover(r, h, exit, takeoverTolerance)
			r.t.Logf("SIGTERM %s: its partitions active elsewhere %s after the signal", exit.Process, gap.Round(time.Millisecond))
			if gap >= opts.LeaseDuration {
				r.t.Errorf("graceful handoff from %s took %s, not less than LeaseDuration %s: the leave waited for expiry", exit.Process, gap, opts.LeaseDuration)
			}
			if r.rng.IntN(2) == 0 {
				h.StartReady(ids[i]) // back before the ring settles
			} else {
				r.converge(h)
				h.StartReady(ids[i])
			}
			r.converge(h)
		}
		r.finish(h, writer)
	})
}

// TestRollingRestartKeepingPlaces is the rolling restart with every
// replica keeping its place on leave (--keep-place-on-leave): each
// restarting replica's partitions wait for its next process, which takes
// them all; none is activated by another replica meanwhile, and none is
// left waiting longer than the restart plus the takeover tolerance.
func TestRollingRestartKeepingPlaces(t *testing.T) {
	scenario(t, "rolling-kept", func(r *round) {
		h := r.harness(harness.Options{KeepPlace: true})
		writer := h.StartWriter(h.CreateConfigMaps(200), 40)
		ids := identities(3 + r.rng.IntN(2))
		r.startFleet(h, ids...)
		r.converge(h)
		since := time.Now().UnixNano()

		for i := len(ids) - 1; i >= 0; i-- {
			r.pause(0, 2*time.Second)
			exit := r.stop(h, ids[i])
			r.faults++
			h.StartReady(ids[i])
			gap := awaitTakeover(r, h, exit, takeoverTolerance)
			r.t.Logf("SIGTERM %s: its partitions active again %s after the signal", exit.Process, gap.Round(time.Millisecond))
			r.converge(h)
		}
		for _, m := range h.Log().Moves(since) {
			r.t.Errorf("partition %d moved to another replica: %s; want it kept for its replica's next process", m.Partition, m)
		}
		r.finish(h, writer)
	})
}
