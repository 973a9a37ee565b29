package chaos

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/kshard/kshard/e2e/harness"
	"github.com/kshard/kshard/internal/recorder"
	"github.com/kshard/kshard/internal/testwait"
)

// safetyWork is how long each reconcile of the blind-write scenarios takes
// before it writes: long enough that every fault finds reconciles in flight.
const safetyWork = time.Second

// blindWriters starts three blind-writing replicas with slow reconciles and
// a writer, and waits until the ring has converged and every replica has
// reconciles in flight.
func blindWriters(r *round) (*harness.Harness, *harness.Writer, []string) {
	h := r.harness(harness.Options{BlindWrite: true, Work: safetyWork})
	writer := h.StartWriter(h.CreateConfigMaps(60), 15)
	ids := identities(3)
	r.startFleet(h, ids...)
	r.converge(h)
	r.pause(0, 2*time.Second)
	return h, writer, ids
}

// awaitInFlight waits until identity has a reconcile in flight (started, not
// ended) and returns how many it has.
func awaitInFlight(r *round, h *harness.Harness, identity string) int {
	r.t.Helper()
	proc := h.Replica(identity).Process
	n := 0
	h.Await(30*time.Second, identity+" reconciling", func() error {
		if n = openReconciles(h.Log(), proc); n == 0 {
			return fmt.Errorf("%s has no reconcile in flight", proc)
		}
		return nil
	})
	return n
}

// openReconciles counts p's reconciles whose end its records do not show.
func openReconciles(log *recorder.Log, p recorder.Process) int {
	n := 0
	for _, iv := range log.Intervals {
		if iv.Process == p && iv.End == math.MaxInt64 {
			n++
		}
	}
	return n
}

// recovered waits until the ring has converged again with the victim's
// process of before the fault in it (a restart does not count: it must
// recover by itself) and reports how long after the fault that was.
func (r *round) recovered(h *harness.Harness, victim string, fault time.Time) {
	r.t.Helper()
	proc := h.Replica(victim).Process
	var (
		ring harness.Ring
		took time.Duration
	)
	err := testwait.Poll(100*time.Millisecond, convergeTimeout, func() error {
		ring = r.converge(h)
		took = time.Since(fault)
		if h.Replica(victim).Process != proc {
			return testwait.Stop(fmt.Errorf("it was restarted as %s", h.Replica(victim).Process))
		}
		if _, in := ring.Members[victim]; !in {
			return errors.New("not in the ring")
		}
		return nil
	})
	if err != nil {
		r.t.Errorf("%s did not rejoin the ring by itself (%s after the fault: %s): %v", proc, took.Round(time.Millisecond), ring, err)
		return
	}
	r.t.Logf("ring converged %s after the fault with %s back in it: %s", took.Round(time.Millisecond), proc, ring)
	if limit := 2*h.Options().LeaseDuration + recoverySlack; took > limit {
		r.t.Errorf("%s recovered %s after the fault; it must within 2×LeaseDuration (%s, with %s scheduling allowance)", proc, took.Round(time.Millisecond), limit, recoverySlack)
	}
}

// TestDeleteLiveMembersLease deletes the Lease of a live, active member
// with reconciles in flight, as kubectl delete lease does. Peers must not
// reconcile its keys while its reconciles can still write; it must fence,
// and rejoin by itself.
func TestDeleteLiveMembersLease(t *testing.T) {
	scenario(t, "delete", func(r *round) {
		r.restartAnyExit = true
		h, writer, ids := blindWriters(r)
		victim := ids[r.rng.IntN(len(ids))]
		n := awaitInFlight(r, h, victim)
		at := h.DeleteLease(victim)
		r.faults++
		r.t.Logf("deleted the Lease of %s with %d reconciles in flight", h.Replica(victim).Process, n)
		r.recovered(h, victim, at)
		r.finish(h, writer)
	})
}

// TestRelabelLiveMembersLease moves a live, active member's Lease out of the
// ring with kubectl label --overwrite kshard.io/ring=other while it has
// reconciles in flight. As with deletion, and the member must repair its
// Lease rather than crash-loop on its own name.
func TestRelabelLiveMembersLease(t *testing.T) {
	scenario(t, "relabel", func(r *round) {
		r.restartAnyExit = true
		h, writer, ids := blindWriters(r)
		victim := ids[r.rng.IntN(len(ids))]
		n := awaitInFlight(r, h, victim)
		at := h.RelabelLease(victim, "other")
		r.faults++
		r.t.Logf("relabelled the Lease of %s (kshard.io/ring=other) with %d reconciles in flight", h.Replica(victim).Process, n)
		r.recovered(h, victim, at)
		r.finish(h, writer)
	})
}

// TestPausedReplica stops a replica with SIGSTOP for 1.5–3×LeaseDuration
// while it has reconciles in flight, then continues it. Its peers take its
// partitions over meanwhile; after SIGCONT it must send nothing (its
// reconciles' lease validity has passed) until it has re-validated its
// lease, so no write of it lands over a peer's.
func TestPausedReplica(t *testing.T) {
	scenario(t, "pause", func(r *round) {
		h, writer, ids := blindWriters(r)
		ld := h.Options().LeaseDuration
		victim := ids[r.rng.IntN(len(ids))]
		proc := h.Replica(victim).Process
		length := r.between(ld*3/2, 3*ld)
		if r.paused == nil {
			r.paused = map[recorder.Process]bool{}
		}
		r.paused[proc] = true
		// Pause it with reconciles in flight: once stopped it records
		// nothing, so the reconciles its records show open are exactly
		// those the pause froze. If they all ended between the look and
		// the signal, continue it and try again.
		var stopped time.Time
		n := 0
		for attempt := 1; n == 0; attempt++ {
			if attempt > 10 {
				r.t.Fatalf("%s never had a reconcile in flight when paused, in 10 attempts", proc)
			}
			awaitInFlight(r, h, victim)
			stopped = h.Pause(victim)
			if n = openReconciles(h.Log(), proc); n == 0 {
				h.Resume(victim)
			}
		}
		r.faults++
		until(stopped.Add(length))
		resumed := h.Resume(victim)
		h.RecordFault("SIGSTOP of "+victim, stopped, resumed)
		r.t.Logf("paused %s for %s with %d reconciles in flight", proc, resumed.Sub(stopped).Round(time.Millisecond), n)

		// The pause must have mattered: peers took the victim's partitions
		// over while it was stopped.
		gap, held, err := h.Log().Takeover(proc, stopped)
		switch {
		case len(held) == 0:
			r.t.Errorf("%s held no partitions when paused; the round tested nothing", proc)
		case err != nil:
			r.t.Errorf("peers did not take %s's partitions over during its pause: %v", proc, err)
		case gap > resumed.Sub(stopped):
			r.t.Errorf("peers took %s's partitions over %s after the pause began, after it resumed; the round tested nothing", proc, gap.Round(time.Millisecond))
		default:
			r.t.Logf("peers activated all %d of %s's partitions %s into its pause", len(held), proc, gap.Round(time.Millisecond))
		}
		r.converge(h)
		log := r.finish(h, writer)
		// How the reconciles frozen by the pause ended: each must have
		// ended without sending (the writes check above), here is why.
		endings := map[string]int{}
		for _, iv := range log.Intervals {
			if iv.Process == proc && iv.Start < stopped.UnixNano() && iv.End > resumed.UnixNano() {
				endings[iv.Ending+": "+iv.Err]++
			}
		}
		sentAfter := 0
		for _, s := range log.Sends {
			if s.Process == proc && s.At >= resumed.UnixNano() {
				sentAfter++
			}
		}
		r.t.Logf("after SIGCONT, %s's reconciles frozen by the pause ended so: %v; it sent %d writes after SIGCONT (each checked above)", proc, endings, sentAfter)
	})
}
