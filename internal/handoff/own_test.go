package handoff

import (
	"testing"
	"time"

	"github.com/kshard/kshard/shard"
)

func TestOwnLease(t *testing.T) {
	// ownOf is a Lease of identity a, written by inc.
	ownOf := func(inc, uid, version string, claim ...int) Observed {
		return leaseOf("a", inc, uid, version, StateActive, claim...)
	}
	damaged := Observed{Record: Record{Identity: "a"}, Version: "9", Problem: "no claim", ClaimUnknown: true}
	terminating := ownOf("inc-a", "u1", "2")
	terminating.Terminating = true
	type step struct {
		at     time.Duration
		leases []Observed
		// answer, when set, is the direct read's answer to a Confirm
		// instead of an Observe: the version found ("": gone).
		answer *string
	}
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name    string
		steps   []step
		judgeAt time.Duration
		// After the steps and a judge at judgeAt:
		held, lost, inUse bool
		lostAt            time.Duration
		duplicate         string
		terminating       string
		confirm           bool   // the previous incarnation's Lease is to be confirmed
		takeOver          string // the version Ready.TakeOver names
		blocked           shard.PartitionSet
	}{{
		name:  "its own write makes the Lease held",
		steps: []step{{0, []Observed{ownOf("inc-a", "u1", "1", 1)}, nil}},
		held:  true, blocked: set(),
	}, {
		name:  "a held Lease that leaves the view is lost from then",
		steps: []step{{0, []Observed{ownOf("inc-a", "u1", "1")}, nil}, {time.Second, nil, nil}, {2 * time.Second, nil, nil}},
		held:  true, lost: true, lostAt: time.Second, blocked: set(),
	}, {
		name: "and no longer once it is seen whole again",
		steps: []step{{0, []Observed{ownOf("inc-a", "u1", "1")}, nil}, {time.Second, nil, nil},
			{2 * time.Second, []Observed{ownOf("inc-a", "u2", "2")}, nil}},
		held: true, blocked: set(),
	}, {
		name:  "a held Lease damaged by hand is lost, and may be written over at that version",
		steps: []step{{0, []Observed{ownOf("inc-a", "u1", "1")}, nil}, {time.Second, []Observed{damaged}, nil}},
		held:  true, lost: true, lostAt: time.Second, takeOver: "9", blocked: set(),
	}, {
		name:  "a held Lease being deleted is lost, and its version finalized",
		steps: []step{{0, []Observed{ownOf("inc-a", "u1", "1")}, nil}, {time.Second, []Observed{terminating}, nil}},
		held:  true, lost: true, lostAt: time.Second, terminating: "2", blocked: set(),
	}, {
		name:  "another incarnation writing a held Lease is a duplicate identity",
		steps: []step{{0, []Observed{ownOf("inc-a", "u1", "1")}, nil}, {time.Second, []Observed{ownOf("inc-x", "u1", "2")}, nil}},
		held:  true, duplicate: "inc-x", blocked: set(),
	}, {
		name:    "a previous incarnation's Lease is waited out",
		steps:   []step{{0, []Observed{ownOf("inc-p", "u1", "1", 2)}, nil}},
		judgeAt: testLease - time.Millisecond,
		inUse:   true, blocked: set(),
	}, {
		name:    "and confirmed once it looks expired",
		steps:   []step{{0, []Observed{ownOf("inc-p", "u1", "1", 2)}, nil}},
		judgeAt: testLease,
		inUse:   true, confirm: true, blocked: set(),
	}, {
		name:     "and taken over at the version confirmed",
		steps:    []step{{0, []Observed{ownOf("inc-p", "u1", "1", 2)}, nil}, {testLease, nil, str("1")}},
		judgeAt:  testLease,
		takeOver: "1", blocked: set(),
	}, {
		name:    "a read that finds it moved on waits it out again",
		steps:   []step{{0, []Observed{ownOf("inc-p", "u1", "1", 2)}, nil}, {testLease, nil, str("7")}},
		judgeAt: testLease + time.Second,
		inUse:   true, blocked: set(),
	}, {
		name:    "a damaged Lease of an earlier incarnation is waited out like an intact one",
		steps:   []step{{0, []Observed{damaged}, nil}},
		judgeAt: testLease,
		inUse:   true, confirm: true, blocked: set(),
	}, {
		name:    "absence is not death: the previous incarnation's claim outlives its Lease",
		steps:   []step{{0, []Observed{ownOf("inc-p", "u1", "1", 2)}, nil}, {time.Second, nil, nil}},
		judgeAt: time.Second + testLease - time.Millisecond,
		blocked: set(2),
	}, {
		name:    "for LeaseDuration",
		steps:   []step{{0, []Observed{ownOf("inc-p", "u1", "1", 2)}, nil}, {time.Second, nil, nil}},
		judgeAt: time.Second + testLease,
		blocked: set(),
	}, {
		name:    "a newer state of the previous incarnation's object replaces its claim",
		steps:   []step{{0, []Observed{ownOf("inc-p", "u1", "1", 2)}, nil}, {time.Second, []Observed{ownOf("inc-p", "u1", "2", 3)}, nil}},
		judgeAt: time.Second,
		inUse:   true, blocked: set(),
	}, {
		name:    "another incarnation writing over it leaves its claim in force",
		steps:   []step{{0, []Observed{ownOf("inc-p", "u1", "1", 2)}, nil}, {time.Second, []Observed{ownOf("inc-q", "u1", "2", 3)}, nil}},
		judgeAt: time.Second,
		inUse:   true, blocked: set(2),
	}, {
		name:    "a reported departure of another incarnation's own Lease keeps its claim",
		steps:   []step{{0, []Observed{gone(ownOf("inc-p", "u1", "1", 4))}, nil}},
		blocked: set(4),
	}, {
		name: "the previous incarnation's Lease departing emptied releases its claim",
		steps: []step{{0, []Observed{ownOf("inc-p", "u1", "1", 2)}, nil},
			{time.Second, []Observed{gone(ownOf("inc-p", "u1", "2"))}, nil}},
		judgeAt: time.Second,
		blocked: set(),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Identity: "a", Incarnation: "inc-a", Ring: testRing, Timing: Timing{LeaseDuration: testLease, RenewDeadline: testDeadline}}.WithDefaults()
			o := newOwnLease(cfg, cfg.Ring.Fingerprint())
			var observation uint64
			for _, s := range tc.steps {
				now := t0.Add(s.at)
				if s.answer != nil {
					var r Ready
					o.judge(now, observation, &r) // asks for the read
					o.confirmed(now, *s.answer, *s.answer != "")
					continue
				}
				observation++
				o.observe(now, observation, s.leases)
			}
			now := t0.Add(tc.judgeAt)
			var r Ready
			o.judge(now, observation, &r)
			if o.held != tc.held || o.lost != tc.lost || o.inUse() != tc.inUse || o.duplicate != tc.duplicate || o.terminating != tc.terminating {
				t.Errorf("held %v lost %v in use %v duplicate %q terminating %q; want %v %v %v %q %q",
					o.held, o.lost, o.inUse(), o.duplicate, o.terminating, tc.held, tc.lost, tc.inUse, tc.duplicate, tc.terminating)
			}
			if tc.lost && !o.lostAt.Equal(t0.Add(tc.lostAt)) {
				t.Errorf("lost at +%v; want +%v", o.lostAt.Sub(t0), tc.lostAt)
			}
			if got := len(r.Confirm) == 1; got != tc.confirm {
				t.Errorf("confirm %v; want %v", r.Confirm, tc.confirm)
			}
			if got := ""; r.TakeOver != nil {
				got = r.TakeOver.Version
				if got != tc.takeOver {
					t.Errorf("take over %q; want %q", got, tc.takeOver)
				}
			} else if tc.takeOver != "" {
				t.Errorf("no take over; want %q", tc.takeOver)
			}
			b := newBlockers(testRing.Partitions, testRing.Fingerprint())
			o.ghosts.block(now, testLease, proofs{}, &b)
			if !b.claimed.Equal(tc.blocked) || b.all {
				t.Errorf("blocked %v (all %v); want %v", b.claimed, b.all, tc.blocked)
			}
		})
	}
}
