package chaos

import (
	"slices"
	"testing"
	"time"

	"github.com/kshard/kshard/e2e/harness"
)

// TestCrashesUnderContinuousUpdates SIGKILLs replicas at random, restarting
// each at once or a little later, while a writer keeps updating 500
// ConfigMaps. One replica's link to the API server is slow throughout, so
// its watches lag its peers'.
func TestCrashesUnderContinuousUpdates(t *testing.T) {
	scenario(t, "crash", func(r *round) {
		h := r.harness(harness.Options{Proxies: true})
		writer := h.StartWriter(h.CreateConfigMaps(500), 60)
		ids := identities(3)
		r.startFleet(h, ids...)
		r.converge(h)
		slow, delay := ids[r.rng.IntN(len(ids))], r.between(20*time.Millisecond, 150*time.Millisecond)
		h.Proxy(slow).Delay(delay)
		r.faults++
		r.t.Logf("%s's link to the API server delays every chunk by %s", slow, delay.Round(time.Millisecond))

		var down []string // killed, not yet restarted
		kills := 5 + r.rng.IntN(3)
		for range kills {
			r.pause(time.Second, 5*time.Second)
			r.revive(h)
			live := h.Live()
			victim := live[r.rng.IntN(len(live))]
			exit := r.kill(h, victim)
			r.faults++
			r.t.Logf("SIGKILL %s", exit.Process)
			down = append(down, victim)
			// Restart at once (its new incarnation waits for the old
			// Lease to expire), or leave it down a while and maybe kill
			// another first; keep at least one running.
			for len(down) > 0 && (r.rng.IntN(2) == 0 || len(h.Live()) == 0) {
				i := r.rng.IntN(len(down))
				h.Start(down[i])
				down = slices.Delete(down, i, i+1)
			}
		}
		for _, id := range down {
			h.Start(id)
		}
		for _, id := range ids {
			h.WaitReady(id)
		}
		r.t.Logf("after %d kills: ring converged: %s", kills, r.converge(h))
		r.finish(h, writer)
	})
}
