package handoff

import (
	"testing"
	"time"

	"github.com/kshard/kshard/shard"
)

func newTestFencing() fencing {
	return newFencing(Config{Ring: testRing, Timing: Timing{LeaseDuration: testLease, RenewDeadline: testDeadline}}.WithDefaults())
}

func TestFencingRenewals(t *testing.T) {
	for _, tc := range []struct {
		name        string
		sent        []time.Duration // renews that succeeded, in the order reported
		lost        bool
		at          time.Duration
		recent, due bool
		lastSent    time.Duration
	}{
		{name: "no renew yet: nothing to fence", at: time.Hour},
		{name: "no renew yet but the own Lease lost: fence", lost: true, due: true},
		{name: "renewed: recent before RenewDeadline", sent: []time.Duration{0}, at: testDeadline - time.Millisecond, recent: true},
		{name: "fence at RenewDeadline after the sending", sent: []time.Duration{0}, at: testDeadline, due: true},
		{name: "the own Lease lost: fence however recent", sent: []time.Duration{0}, lost: true, recent: true, due: true},
		{name: "a renew sent RenewDeadline after the previous one is a lapse: fence though recent",
			sent: []time.Duration{0, testDeadline}, at: testDeadline, recent: true, due: true, lastSent: testDeadline},
		{name: "one sent just within it is none",
			sent: []time.Duration{0, testDeadline - time.Millisecond}, at: testDeadline, recent: true, lastSent: testDeadline - time.Millisecond},
		{name: "an older renew answered late does not move the deadline back",
			sent: []time.Duration{5 * time.Second, 2 * time.Second}, at: 5*time.Second + testDeadline - time.Millisecond, recent: true, lastSent: 5 * time.Second},
		{name: "a renew sent in the future counts as sent now",
			sent: []time.Duration{time.Hour}, at: 0, recent: true, lastSent: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFencing()
			for _, s := range tc.sent {
				f.succeeded(t0.Add(s))
			}
			now := t0.Add(tc.at)
			f.clamp(now)
			if got := f.recent(now); got != tc.recent {
				t.Errorf("recent %v; want %v", got, tc.recent)
			}
			if len(tc.sent) > 0 && !f.lastSent.Equal(t0.Add(tc.lastSent)) {
				t.Errorf("last renew sent at +%v; want +%v", f.lastSent.Sub(t0), tc.lastSent)
			}
			if got := f.due(now, tc.lost); got != tc.due {
				t.Errorf("due %v; want %v", got, tc.due)
			}
			if f.lapsed {
				t.Error("a lapse outlived the check that saw it")
			}
		})
	}
}

// A renew that succeeds while fenced is no lapse: the fence is already
// there, and lifting it is lift's business.
func TestFencingRenewWhileFencedIsNoLapse(t *testing.T) {
	f := newTestFencing()
	f.succeeded(t0)
	f.start(t0.Add(testDeadline), set(1))
	f.succeeded(t0.Add(2 * testDeadline))
	if f.lapsed {
		t.Fatal("a renew while fenced counts as a lapse")
	}
}

func TestFencingLift(t *testing.T) {
	for _, tc := range []struct {
		name     string
		renewAt  time.Duration // the renew that succeeds after the fence
		lost     bool
		lostAt   time.Duration
		at       time.Duration
		unfenced bool
	}{
		{"a renew in time lifts the fence", 10 * time.Second, false, 0, 11 * time.Second, true},
		{"not while the own Lease is lost", 10 * time.Second, true, 9 * time.Second, 11 * time.Second, false},
		{"nor with a renew sent before the loss", 10 * time.Second, false, 10 * time.Second, 11 * time.Second, false},
		{"nor once that renew is past its deadline", 10 * time.Second, false, 0, 10*time.Second + testDeadline, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFencing()
			f.succeeded(t0)
			f.start(t0.Add(testDeadline), set())
			f.succeeded(t0.Add(tc.renewAt))
			f.lift(t0.Add(tc.at), tc.lost, t0.Add(tc.lostAt))
			if f.fenced == tc.unfenced {
				t.Fatalf("fenced %v; want %v", f.fenced, !tc.unfenced)
			}
		})
	}
}

func TestFencingStopDeadline(t *testing.T) {
	sd := newTestFencing().stopDeadline
	for _, tc := range []struct {
		name     string
		renewed  bool
		fenceAt  time.Duration
		again    time.Duration // a second fence after a renew at again-1s; 0: none
		draining []int         // what still drains when checked
		at       time.Duration
		overdue  bool
	}{
		{"running past StopDeadline after the last renew: exit", true, testDeadline, 0, []int{1}, sd, true},
		{"not before", true, testDeadline, 0, []int{1}, sd - time.Millisecond, false},
		{"nor once it drained", true, testDeadline, 0, nil, sd, false},
		{"never renewed: StopDeadline from the fence", false, time.Second, 0, []int{1}, time.Second + sd, true},
		{"never renewed, not before", false, time.Second, 0, []int{1}, time.Second + sd - time.Millisecond, false},
		{"a later fence keeps the earlier deadline", true, testDeadline, 2 * testDeadline, []int{1, 2}, sd, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFencing()
			if tc.renewed {
				f.succeeded(t0)
			}
			f.start(t0.Add(tc.fenceAt), set(1))
			if tc.again != 0 {
				f.succeeded(t0.Add(tc.again - time.Second))
				f.lift(t0.Add(tc.again), false, time.Time{})
				f.start(t0.Add(tc.again), set(1, 2))
			}
			if got := f.overdue(t0.Add(tc.at), set(tc.draining...)); got != tc.overdue {
				t.Fatalf("overdue %v (stop by +%v); want %v", got, f.stopBy.Sub(t0), tc.overdue)
			}
		})
	}
}

func TestFencingNextDeadline(t *testing.T) {
	f := newTestFencing()
	f.succeeded(t0)
	var next []time.Time
	f.nextDeadline(func(at time.Time) { next = append(next, at) })
	if len(next) != 1 || !next[0].Equal(t0.Add(testDeadline)) {
		t.Fatalf("deadlines %v; want the renew deadline", next)
	}
	f.start(t0.Add(testDeadline), set(1))
	next = nil
	f.nextDeadline(func(at time.Time) { next = append(next, at) })
	if len(next) != 1 || !next[0].Equal(t0.Add(f.stopDeadline)) {
		t.Fatalf("fenced: deadlines %v; want the stop deadline", next)
	}
}

// A fence, and the stop of a duplicate identity, revoke every partition
// that is active or still draining: a drain under way gives up the rest of
// its grace period. The shell revokes Ready.Revoke and nothing else.
func TestFenceRevokesActiveAndDraining(t *testing.T) {
	for _, tc := range []struct {
		name    string
		drained shard.PartitionSet // reported drained after a leave revoked everything
		leave   bool
		stop    bool // a duplicate identity instead of a missed renewal
		want    shard.PartitionSet
	}{
		{name: "all active", want: shard.FullPartitionSet(7)},
		{name: "some draining, none active", leave: true, drained: set(0, 1, 2, 3, 4), want: set(5, 6)},
		{name: "all draining", leave: true, drained: set(), want: shard.FullPartitionSet(7)},
		{name: "all drained", leave: true, drained: shard.FullPartitionSet(7), want: set()},
		{name: "duplicate identity, all active", stop: true, want: shard.FullPartitionSet(7)},
		{name: "duplicate identity, some draining", stop: true, leave: true, drained: set(0, 1), want: set(2, 3, 4, 5, 6)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := activeAlone(t, "a")
			if tc.leave {
				h.c.Leave()
				if r := h.ready(); !r.Revoke.Equal(shard.FullPartitionSet(7)) {
					t.Fatalf("leave revoked %v; want everything", r.Revoke)
				}
				h.c.Drained(tc.drained)
			}
			if tc.stop {
				h.own = &Observed{Record: Record{Identity: "a", Incarnation: "intruder", State: StateJoining,
					Claim: set(), Generation: 1, Fingerprint: testRing.Fingerprint()}, Version: h.version()}
				h.c.Observe(h.now, h.snapshot(nil))
			} else {
				h.advance(testDeadline)
			}
			r := h.c.Ready(h.now)
			if !r.Fence || !r.Revoke.Equal(tc.want) {
				t.Fatalf("fence %v revoke %v; want a fence revoking %v", r.Fence, r.Revoke, tc.want)
			}
		})
	}
}
