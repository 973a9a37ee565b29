package chaos

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kshard/kshard/e2e/harness"
	"github.com/kshard/kshard/internal/recorder"
	"github.com/kshard/kshard/manager/kshardtest"
	"github.com/kshard/kshard/shard"
)

// slowWork and slowGrace make every reconcile outlive a drain's grace
// period, so each rebalance has to cancel (or wait for) reconciles in flight.
const (
	slowWork  = 3 * time.Second
	slowGrace = time.Second
)

// rebalanceSlowly scales two replicas to three and back while every
// reconcile takes slowWork, and returns the records and the ring's
// partition count.
func rebalanceSlowly(r *round, ignoreCancel bool) (*recorder.Log, int) {
	h := r.harness(harness.Options{Work: slowWork, DrainGrace: slowGrace, IgnoreCancel: ignoreCancel})
	writer := h.StartWriter(h.CreateConfigMaps(40), 8)
	ids := identities(3)
	h.StartReady(ids[:2]...)
	r.converge(h)
	r.pause(slowWork/2, 2*slowWork) // let the workers fill up

	h.StartReady(ids[2])
	r.faults++
	r.converge(h)
	r.pause(slowWork/2, 2*slowWork)
	exit := r.stop(h, ids[2])
	r.faults++
	inFlight, total := 0, 0
	for _, iv := range h.Log().Intervals {
		if iv.Process == exit.Process {
			total++
			if iv.Start < exit.Signalled.UnixNano() && iv.End > exit.Signalled.UnixNano() {
				inFlight++
			}
		}
	}
	r.t.Logf("%s left %s after SIGTERM, having run %d reconciles, %d of them in flight at the signal",
		exit.Process, exit.Exited.Sub(exit.Signalled).Round(time.Millisecond), total, inFlight)
	r.converge(h)
	return r.finish(h, writer), h.Options().Partitions
}

// TestSlowReconcilerDuringRebalance rebalances while reconciles take
// seconds each: drains cancel them after the grace period and wait for them
// to return before releasing their partitions.
func TestSlowReconcilerDuringRebalance(t *testing.T) {
	scenario(t, "slow", func(r *round) {
		log, _ := rebalanceSlowly(r, false)
		if rep := log.Check(); rep.Failed == 0 {
			r.t.Errorf("no reconcile was cancelled (%d reconciles); the rebalances cut no slow reconcile short, so the scenario proved nothing", rep.Intervals)
		}
	})
}

// TestReconcilerIgnoringCancellation rebalances while reconciles take
// seconds and ignore their context: a drain must wait for them past its
// grace period, never release early.
func TestReconcilerIgnoringCancellation(t *testing.T) {
	scenario(t, "stubborn", func(r *round) {
		log, partitions := rebalanceSlowly(r, true)
		if n := outlivedGrace(log, partitions, slowGrace); n == 0 {
			r.t.Error("no reconcile outlived its drain's grace period; the scenario never made a drain wait")
		} else {
			r.t.Logf("%d reconciles ran past their drain's grace period, and every drain waited for them", n)
		}
	})
}

// outlivedGrace counts reconciles that ended more than grace after their
// process began revoking their partition: the ones a drain had to wait for.
func outlivedGrace(log *recorder.Log, partitions int, grace time.Duration) int {
	partitioner := shard.NewPartitioner(partitions)
	n := 0
	for _, iv := range log.Intervals {
		part := partitioner.Partition(iv.Key)
		for _, rec := range log.Ring {
			if rec.Kind != recorder.KindRevoke || rec.Process != iv.Process || rec.At < iv.Start || rec.At > iv.End {
				continue
			}
			if slices.Contains(rec.Partitions, part) && iv.End-rec.At > int64(grace) {
				n++
				break
			}
		}
	}
	return n
}

// TestStubbornReconcilerCutOff cuts off a replica whose reconciles take
// seconds and ignore cancellation. Its fence cannot cancel them: it must
// either see them return by the stop deadline or exit, in either case before
// its Lease can expire and before any peer activates one of its partitions.
// After the heal it rejoins (restarted, if it exited).
func TestStubbornReconcilerCutOff(t *testing.T) {
	scenario(t, "cutoff", func(r *round) {
		h := r.harness(harness.Options{Work: slowWork, DrainGrace: slowGrace, IgnoreCancel: true, Proxies: true})
		opts := h.Options()
		writer := h.StartWriter(h.CreateConfigMaps(40), 8)
		ids := identities(3)
		r.startFleet(h, ids...)
		r.converge(h)
		r.pause(slowWork/2, 2*slowWork) // let the workers fill up

		victim := ids[r.rng.IntN(len(ids))]
		rep := h.Replica(victim)
		proc := rep.Process
		cut := time.Now()
		h.Proxy(victim).Blackhole()
		r.faults++
		var (
			exit    harness.Exit
			exited  bool
			stopped time.Time // when the victim's last reconcile ended: drained, or dead
		)
		h.Await(opts.LeaseDuration+takeoverTolerance, victim+" to stop reconciling (drained or exited)", func() error {
			if exit, exited = rep.Exited(); exited {
				stopped = exit.Exited
				return nil
			}
			f, err := fenceOf(h.Log(), proc, cut)
			stopped = f.drained
			return err
		})
		log := h.Log()
		held := log.ActiveAt(proc, cut.UnixNano())
		inFlight := 0
		for _, iv := range log.Intervals {
			if iv.Process == proc && iv.Start <= cut.UnixNano() && iv.End > cut.UnixNano() {
				inFlight++
			}
		}
		how := "drained (its reconciles returned by the stop deadline)"
		if exited {
			how = fmt.Sprintf("exited with code %d", exit.Code)
		}
		r.t.Logf("%s, holding %d partitions with %d reconciles in flight at the cut, %s %s after it",
			proc, len(held), inFlight, how, stopped.Sub(cut).Round(time.Millisecond))
		// Its last renewal was sent before the cut, so its Lease cannot
		// expire before cut + LeaseDuration, nor may it still reconcile then.
		if limit := cut.Add(opts.LeaseDuration); stopped.After(limit) {
			r.t.Errorf("%s still reconciled %s after the cut, later than LeaseDuration %s", proc, stopped.Sub(cut), opts.LeaseDuration)
		}
		gap := awaitTakeover(r, h, harness.Exit{Process: proc, Signalled: cut}, opts.LeaseDuration+takeoverTolerance)
		elsewhere := activatedElsewhere(h.Log(), proc, cut)
		for _, part := range held {
			if a := elsewhere[part]; !a.After(stopped) {
				r.t.Errorf("partition %d was activated by a peer at %s, before %s stopped reconciling at %s", part, a.Format(time.RFC3339Nano), proc, stopped.Format(time.RFC3339Nano))
			}
		}
		r.t.Logf("peers took over all of %s's partitions %s after the cut", proc, gap.Round(time.Millisecond))

		until(cut.Add(2 * opts.LeaseDuration))
		h.Proxy(victim).Heal()
		healed := time.Now()
		// Until the victim's informers' backoff lets them list again.
		h.RecordFault("blackhole of "+victim, cut, healed.Add(kshardtest.InformerRecovery(healed.Sub(cut))))
		r.revive(h) // restarts the victim if it exited, as its StatefulSet would
		if exited && !r.fenceExits[proc] {
			r.t.Errorf("%s's exit was not a fence exit", proc)
		}
		h.WaitReady(victim)
		r.t.Logf("%s rejoined: %s", victim, r.converge(h))
		r.finish(h, writer)
	})
}
