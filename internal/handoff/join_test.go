package handoff

import (
	"slices"
	"testing"
	"time"

	"github.com/kshard/kshard/shard"
)

// freshHarness is a harness whose core has not listed the ring yet: its
// join wait starts at its first Observe.
func freshHarness(t *testing.T, identity string) *harness {
	h := newHarness(t, identity)
	h.c.join.firstSeen = time.Time{}
	h.c.CachesSynced()
	return h
}

// finalizedPeer stores a peer's Lease carrying the member finalizer.
func (h *harness) finalizedPeer(id string, state State, claim ...int) *Observed {
	o := h.setPeer(id, state, claim...)
	o.Finalized = true
	return o
}

// joinAfter steps a fresh core every second, renewing, until it activates
// something; it returns how long that took, or -1 if nothing activated
// within limit.
func (h *harness) joinAfter(limit time.Duration) time.Duration {
	h.t.Helper()
	start := h.now
	for h.now.Sub(start) <= limit {
		if got := h.settle(); !got.IsEmpty() {
			return h.now.Sub(start)
		}
		h.renewFor(time.Second)
	}
	return -1
}

func TestJoinWaitsALeaseDurationOfWatching(t *testing.T) {
	h := freshHarness(t, "a")
	h.finalizedPeer("b", StateActive) // a member that claims nothing (yet)
	// No scan reported: a Lease deleted or relabelled by hand before the
	// first list may hide a holder still reconciling.
	if got := h.joinAfter(2 * testLease); got < testLease {
		t.Fatalf("joined after %v without a scan; want the join wait of %v", got, testLease)
	}
}

func TestFastJoinWhenEveryLeaseIsFinalizedAndTheScanIsClean(t *testing.T) {
	h := freshHarness(t, "a")
	h.finalizedPeer("b", StateActive)
	h.c.JoinScanClean()
	if got := h.joinAfter(2 * testLease); got < 0 || got >= testLease/2 {
		t.Fatalf("joined after %v with every Lease finalized and a clean scan; want at once", got)
	}
	if next, ok := h.c.NextDeadline(); ok && !next.After(h.now) {
		t.Fatalf("NextDeadline %v is not in the future", next)
	}
}

func TestJoinWaitsForALeaseWithoutTheFinalizer(t *testing.T) {
	h := freshHarness(t, "a")
	h.finalizedPeer("b", StateActive)
	h.setPeer("c", StateActive) // written by a kshard that adds no finalizer
	h.c.JoinScanClean()
	if got := h.joinAfter(2 * testLease); got < testLease {
		t.Fatalf("joined after %v beside a Lease without the finalizer; want the join wait", got)
	}
}

// The scan arriving later than the first list still ends the wait, and the
// first view alone decides whether it may: a finalizer-less Lease seen only
// after the first list is in the view, so its claims count.
func TestLateScanEndsTheJoinWait(t *testing.T) {
	h := freshHarness(t, "a")
	h.finalizedPeer("b", StateActive)
	h.sync()
	h.renewFor(2 * time.Second)
	if got := h.settle(); !got.IsEmpty() {
		t.Fatalf("activated %v before the scan", got)
	}
	h.setPeer("c", StateActive, 5) // appears after the first list, without the finalizer
	h.c.JoinScanClean()
	got := h.settle()
	if got.IsEmpty() || got.Has(5) {
		t.Fatalf("after a clean scan activated %v; want a share that leaves c's claim alone", got)
	}
}

func TestOwnLeaseTerminatingFencesAndFinalizesOnceDrained(t *testing.T) {
	h := activeAlone(t, "a")
	all := shard.FullPartitionSet(testRing.Partitions)
	terminate := func() {
		h.own.Terminating, h.own.Finalized = true, true
	}
	terminate()
	h.own.Version = h.version()
	h.c.Observe(h.now, h.snapshot(nil))
	r := h.ready()
	terminate()
	if !r.Fence || !r.Revoke.Equal(all) || !h.c.Fenced() {
		t.Fatalf("own Lease terminating: fence %v revoke %v; want a fence revoking everything", r.Fence, r.Revoke)
	}
	if r.Finalize != nil {
		t.Fatalf("Finalize %+v asked for while everything still runs", r.Finalize)
	}
	h.c.Drained(all)
	r = h.ready() // publishes the empty claim; not observed yet
	terminate()
	if r.Finalize != nil {
		t.Fatalf("Finalize %+v asked for before the empty claim is in the Lease", r.Finalize)
	}
	h.c.Observe(h.now, h.snapshot(nil))
	r = h.ready()
	terminate()
	if r.Finalize == nil || r.Finalize.Version != h.own.Version || r.Finalize.Identity != "a" {
		t.Fatalf("drained with its empty claim observed: Finalize %+v; want version %s", r.Finalize, h.own.Version)
	}
	// Renews of a terminating Lease succeed: they must not end the fence.
	h.renewFor(time.Second)
	if r := h.sync(); !r.Activate.IsEmpty() || !h.c.Fenced() {
		t.Fatalf("renewing a terminating Lease: activated %v, fenced %v", r.Activate, h.c.Fenced())
	}
	// The finalizer is removed: the Lease is gone, then the shell creates
	// it afresh with the latest Record.
	last := h.own.Record
	h.own = nil
	h.c.Observe(h.now, h.snapshot(nil))
	if r := h.ready(); r.Finalize != nil {
		t.Fatalf("Finalize %+v asked for a Lease that is gone", r.Finalize)
	}
	h.renewFor(time.Second)
	h.own = &Observed{Record: last, Version: h.version()}
	if got := h.settle(); !got.Equal(all) {
		t.Fatalf("after the Lease was created afresh, activated %v; want everything", got)
	}
}

func TestTerminatingPeerIsNoMemberButItsClaimCounts(t *testing.T) {
	h := activeAlone(t, "a")
	h.finalizedPeer("b", StateActive)
	h.renewFor(time.Second)
	h.settle()
	if got := h.c.View(); len(got) != 2 {
		t.Fatalf("view %v; want a and b", got)
	}
	h.c.Drained(h.c.Draining())
	h.settle()
	share := shard.FullPartitionSet(testRing.Partitions).Difference(h.c.Active())
	if share.IsEmpty() {
		t.Fatal("b got no share of the ring")
	}
	p := share.Slice()[0]
	b := h.finalizedPeer("b", StateActive, p)
	b.Terminating = true
	h.renewFor(time.Second)
	h.settle()
	if got := h.c.View(); len(got) != 1 || got[0] != "a" {
		t.Fatalf("view %v with b's Lease terminating; want only a", got)
	}
	if h.c.Active().Has(p) || !h.c.Blocked().Has(p) {
		t.Fatalf("active %v blocked %v: b's terminating Lease claims %d and must block it", h.c.Active(), h.c.Blocked(), p)
	}
}

// A damaged Lease in the first view shows no Generation, so a stale view of
// an older, intact state of it could not be told from a repair: the replica
// waits as before.
func TestJoinWaitsBesideADamagedLease(t *testing.T) {
	for _, damaged := range []bool{false, true} {
		h := freshHarness(t, "a")
		h.finalizedPeer("b", StateActive)
		c := h.finalizedPeer("c", StateJoining)
		if damaged {
			c.Problem, c.Incarnation = "annotation kshard.io/incarnation is missing", ""
		}
		h.c.JoinScanClean()
		h.settle()
		h.renewFor(testLease / 2)
		h.settle()
		if joined := h.c.State() == StateActive; joined == damaged {
			t.Errorf("damaged Lease in the first view %v: active after %v = %v; want %v", damaged, testLease/2, joined, !damaged)
		}
	}
}

func TestJoinWait(t *testing.T) {
	finalized := func(o Observed) Observed { o.Finalized = true; return o }
	member := leaseOf("b", "b1", "u", "1", StateActive, 1)
	damaged := finalized(Observed{Record: Record{Identity: "c"}, Version: "2", Problem: "bad", ClaimUnknown: true})
	for _, tc := range []struct {
		name  string
		first []Observed // the first view
		clean bool       // the scan found no finalized Lease outside the ring
		at    time.Duration
		over  bool
	}{
		{"the wait lasts LeaseDuration from the first view", []Observed{member}, true, testLease - time.Millisecond, false},
		{"and ends then", []Observed{member}, true, testLease, true},
		{"every Lease finalized and a clean scan: join at once", []Observed{finalized(member)}, true, 0, true},
		{"an empty ring after a clean scan: join at once", nil, true, 0, true},
		{"not without the scan", []Observed{finalized(member)}, false, 0, false},
		{"nor beside a Lease without the finalizer", []Observed{finalized(member), leaseOf("c", "c1", "u2", "2", StateActive)}, true, 0, false},
		{"nor beside a damaged one", []Observed{finalized(member), damaged}, true, 0, false},
		{"a departed Lease in the first view does not count", []Observed{finalized(member), gone(leaseOf("c", "c1", "u2", "2", StateActive))}, true, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := joinWait{lease: testLease}
			if j.over(t0.Add(time.Hour)) {
				t.Fatal("over before the first view")
			}
			j.observe(t0, tc.first)
			j.observe(t0.Add(tc.at), []Observed{member}) // later views change nothing
			j.scanClean = tc.clean
			if got := j.over(t0.Add(tc.at)); got != tc.over {
				t.Fatalf("over %v; want %v", got, tc.over)
			}
		})
	}
}

func TestJudgeJoinScan(t *testing.T) {
	member := func(name string) ScannedLease { return ScannedLease{Name: "r-" + name, Ring: "r", Finalized: true} }
	for name, c := range map[string]struct {
		leases  []ScannedLease
		members []int
		outside int
	}{
		"only the ring's":                                          {[]ScannedLease{member("a"), member("b")}, []int{0, 1}, -1},
		"an older kshard's member, unfinalized":                    {[]ScannedLease{member("a"), {Name: "r-b", Ring: "r"}}, []int{0, 1}, -1},
		"another ring's member":                                    {[]ScannedLease{member("a"), {Name: "s-b", Ring: "s", Finalized: true}}, []int{0}, -1},
		"a foreign Lease without the finalizer":                    {[]ScannedLease{{Name: "leader"}, member("a")}, []int{1}, -1},
		"a member relabelled out of every ring":                    {[]ScannedLease{member("a"), {Name: "r-b", Finalized: true}}, []int{0}, 1},
		"relabelled into a ring its name is not of":                {[]ScannedLease{{Name: "r-b", Ring: "s", Finalized: true}}, nil, 0},
		"unfinalized and relabelled: an older kshard's, invisible": {[]ScannedLease{{Name: "r-b"}}, nil, -1},
	} {
		got := JudgeJoinScan("r", c.leases)
		if !slices.Equal(got.Members, c.members) || got.Outside != c.outside {
			t.Errorf("%s: JudgeJoinScan = %+v, want members %v, outside %d", name, got, c.members, c.outside)
		}
	}
}
