package chaos

import (
	"slices"
	"testing"
	"time"

	"github.com/kshard/kshard/e2e/harness"
	"github.com/kshard/kshard/manager/kshardtest"
)

// TestBlackholedReplica cuts one of three replicas off from the API server
// with its proxy for 2×LeaseDuration, holding its connections open but
// silent, then heals it. The cut-off replica must fence within RenewDeadline
// and be drained before any peer activates one of its partitions; the peers
// must take over; after the heal it must rejoin.
func TestBlackholedReplica(t *testing.T) {
	scenario(t, "partition", func(r *round) {
		h := r.harness(harness.Options{Proxies: true})
		opts := h.Options()
		writer := h.StartWriter(h.CreateConfigMaps(100), 20)
		ids := identities(3)
		r.startFleet(h, ids...)
		r.converge(h)
		r.pause(0, 3*time.Second)

		victim := ids[r.rng.IntN(len(ids))]
		proc := h.Replica(victim).Process
		proxy := h.Proxy(victim)
		cut := time.Now()
		proxy.Blackhole()
		r.faults++
		r.t.Logf("blackholed %s (%d connections through its proxy so far)", proc, proxy.Accepted())

		var f fence
		h.Await(opts.LeaseDuration+takeoverTolerance, victim+" fenced", func() error {
			var err error
			f, err = fenceOf(h.Log(), proc, cut)
			return err
		})
		r.t.Logf("%s fenced %d partitions: revoke %s and drained %s after the cut",
			proc, len(f.held), f.began.Sub(cut).Round(time.Millisecond), f.drained.Sub(cut).Round(time.Millisecond))
		if limit := cut.Add(opts.RenewDeadline + schedulingSlack); f.began.After(limit) {
			r.t.Errorf("%s began fencing %s after the cut, later than RenewDeadline %s (+%s slack)", proc, f.began.Sub(cut), opts.RenewDeadline, schedulingSlack)
		}

		gap := awaitTakeover(r, h, harness.Exit{Process: proc, Signalled: cut}, opts.LeaseDuration+takeoverTolerance)
		r.t.Logf("peers took over all of %s's partitions %s after the cut", proc, gap.Round(time.Millisecond))
		elsewhere := activatedElsewhere(h.Log(), proc, cut)
		for _, part := range f.held {
			if a := elsewhere[part]; !a.After(f.revoked[part]) {
				r.t.Errorf("partition %d was activated by a peer at %s, before %s drained it at %s",
					part, a.Format(time.RFC3339Nano), proc, f.revoked[part].Format(time.RFC3339Nano))
			}
		}

		until(cut.Add(2 * opts.LeaseDuration))
		if !slices.Contains(h.Live(), victim) {
			r.t.Fatalf("%s exited while cut off; a fenced replica must stay up and rejoin", victim)
		}
		proxy.Heal()
		healed := time.Now()
		// Until the victim's informers' backoff lets them list again.
		h.RecordFault("blackhole of "+victim, cut, healed.Add(kshardtest.InformerRecovery(healed.Sub(cut))))
		h.WaitReady(victim)
		ring := r.converge(h)
		r.t.Logf("%s rejoined %s after the heal: %s", victim, time.Since(healed).Round(time.Millisecond), ring)
		if ring.Members[victim].Claim.Len() == 0 {
			r.t.Errorf("%s claims no partitions after rejoining", victim)
		}
		r.finish(h, writer)
	})
}
