package handoff

import (
	"testing"
	"time"

	"github.com/kshard/kshard/shard"
)

var t0 = time.Unix(1000, 0)

// ghostObs is a departed state of Lease object uid, written by inc,
// claiming claim (over testRing's partitions).
func ghostObs(uid, inc string, claim ...int) Observed {
	return Observed{Record: Record{Identity: "b", Incarnation: inc, Claim: set(claim...), Fingerprint: testRing.Fingerprint(), Generation: 1},
		UID: uid, Version: uid + "-v"}
}

func TestGhostListAdd(t *testing.T) {
	for _, tc := range []struct {
		name    string
		before  []peer // existing ghosts
		obs     Observed
		at      time.Duration // after t0
		seen    uint64
		covered bool
		// want: the ghosts after, as (claim, lastChange offset, void)
		want []ghostWant
	}{{
		name: "a new object's claim becomes a ghost learnt now",
		obs:  ghostObs("u1", "b1", 1), at: time.Second,
		want: []ghostWant{{claim: set(1), at: time.Second}},
	}, {
		name:   "another state of an object in force adds its claim, the clock stands",
		before: []peer{{obs: ghostObs("u1", "b1", 1), lastChange: t0}},
		obs:    ghostObs("u1", "b1", 2), at: time.Second,
		want: []ghostWant{{claim: set(1, 2), at: 0}},
	}, {
		name:   "an expired ghost takes no more claims",
		before: []peer{{obs: ghostObs("u1", "b1", 1), lastChange: t0}},
		obs:    ghostObs("u1", "b1", 2), at: testLease,
		want: []ghostWant{{claim: set(1), at: 0}},
	}, {
		name:   "a claim over another partition count is not merged",
		before: []peer{{obs: ghostObs("u1", "b1", 1), lastChange: t0}},
		obs: func() Observed {
			o := ghostObs("u1", "b1")
			o.Claim = shard.NewPartitionSet(3, 2)
			return o
		}(),
		want: []ghostWant{{claim: set(1), at: 0}},
	}, {
		name: "a departure covered by a later Lease of its incarnation is void",
		obs:  ghostObs("u1", "b1", 1), seen: 4, covered: true,
		want: []ghostWant{{claim: set(1), at: 0, void: true}},
	}, {
		name:   "a claim seen in force revives a ghost found covered",
		before: []peer{{obs: ghostObs("u1", "b1", 1), lastChange: t0, void: true, seen: 4}},
		obs:    ghostObs("u1", "b1", 3), at: time.Second,
		want: []ghostWant{{claim: set(3), at: time.Second}},
	}, {
		name:   "a departure reported again does not revive a covered ghost",
		before: []peer{{obs: ghostObs("u1", "b1", 1), lastChange: t0, void: true, seen: 4}},
		obs:    ghostObs("u1", "b1", 3), at: time.Second, seen: 5,
		want: []ghostWant{{claim: set(1), at: 0, void: true}},
	}, {
		name:   "another object is another ghost",
		before: []peer{{obs: ghostObs("u1", "b1", 1), lastChange: t0}},
		obs:    ghostObs("u2", "b1", 2), at: time.Second,
		want: []ghostWant{{claim: set(1), at: 0}, {claim: set(2), at: time.Second}},
	}, {
		name:   "without UIDs, versions tell objects apart",
		before: []peer{{obs: Observed{Record: Record{Claim: set(1)}, Version: "1"}, lastChange: t0}},
		obs:    Observed{Record: Record{Claim: set(2)}, Version: "2"},
		want:   []ghostWant{{claim: set(1), at: 0}, {claim: set(2), at: 0}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var gs ghostList
			for _, g := range tc.before {
				g.gone, g.collected = true, true
				gs = append(gs, &g)
			}
			gs = gs.add(t0.Add(tc.at), testLease, tc.obs, tc.seen, tc.covered)
			if len(gs) != len(tc.want) {
				t.Fatalf("%d ghosts; want %d", len(gs), len(tc.want))
			}
			for i, w := range tc.want {
				g := gs[i]
				if !g.obs.Claim.Equal(w.claim) || !g.lastChange.Equal(t0.Add(w.at)) || g.void != w.void || !g.gone {
					t.Errorf("ghost %d: claim %v learnt at +%v void %v gone %v; want %v at +%v void %v, gone",
						i, g.obs.Claim, g.lastChange.Sub(t0), g.void, g.gone, w.claim, w.at, w.void)
				}
			}
			if tc.seen != 0 && gs[0].seen < tc.seen && len(tc.before) > 0 {
				t.Errorf("ghost seen %d; want at least %d (the report that carried it)", gs[0].seen, tc.seen)
			}
		})
	}
}

type ghostWant struct {
	claim shard.PartitionSet
	at    time.Duration
	void  bool
}

func TestGhostListPruneAndBlock(t *testing.T) {
	const observation = 7
	deaths := proofs{}
	deaths.add(Death{PodUID: "pod-dead", Incarnation: "b-dead"}, "self")
	for _, tc := range []struct {
		name       string
		ghost      peer
		kept, blks bool // kept by prune at t0+1s; blocks its claim then
	}{
		{"in force", peer{obs: ghostObs("u", "b1", 1), lastChange: t0}, true, true},
		{"expired, not reported", peer{obs: ghostObs("u", "b1", 1), lastChange: t0.Add(time.Second - testLease)}, false, false},
		{"expired but still reported: kept so that the report does not arm it again", peer{obs: ghostObs("u", "b1", 1), lastChange: t0.Add(-testLease), seen: observation}, true, false},
		{"void, not reported", peer{obs: ghostObs("u", "b1", 1), lastChange: t0, void: true}, false, false},
		{"void, reported", peer{obs: ghostObs("u", "b1", 1), lastChange: t0, void: true, seen: observation}, true, false},
		{"writer proven dead", peer{obs: func() Observed { o := ghostObs("u", "b-dead", 1); o.Pod = "pod-dead"; return o }(), lastChange: t0}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := t0.Add(time.Second)
			g := tc.ghost
			gs := ghostList{&g}.prune(now, testLease, observation)
			if kept := len(gs) == 1; kept != tc.kept {
				t.Errorf("kept %v; want %v", kept, tc.kept)
			}
			b := newBlockers(testRing.Partitions, testRing.Fingerprint())
			ghostList{&g}.block(now, testLease, deaths, &b)
			if blks := b.blocks(1); blks != tc.blks {
				t.Errorf("blocks its claim: %v; want %v", blks, tc.blks)
			}
		})
	}
}
