package handoff

import (
	"slices"
	"testing"
	"time"

	"github.com/kshard/kshard/internal/assign"

	"github.com/kshard/kshard/shard"
)

// newTestView is the view of peers of replica "a" on testRing.
func newTestView() peerView {
	cfg := Config{Identity: "a", Incarnation: "inc-a", Ring: testRing, Timing: Timing{LeaseDuration: testLease, RenewDeadline: testDeadline}}.WithDefaults()
	return newPeerView(cfg, cfg.Ring.Fingerprint())
}

// leaseOf is a well-formed Lease of id on testRing.
func leaseOf(id, inc, uid, version string, state State, claim ...int) Observed {
	return Observed{Record: Record{Identity: id, Incarnation: inc, State: state, Claim: set(claim...), Generation: 1,
		Fingerprint: testRing.Fingerprint()}, UID: uid, Version: version}
}

func gone(o Observed) Observed { o.Gone = true; return o }

func withGeneration(o Observed, gen uint64) Observed { o.Generation = gen; return o }

func TestPeerViewObserve(t *testing.T) {
	type step struct {
		at     time.Duration
		leases []Observed
	}
	for _, tc := range []struct {
		name  string
		trust bool // trustWatchOrder
		steps []step
		// After the steps: what blocks activation, the tombstones'
		// identities, and the identities the view keeps.
		blocked    shard.PartitionSet
		tombstones []string
		kept       []string
	}{{
		name:    "a Lease in the view counts its claim",
		steps:   []step{{0, []Observed{leaseOf("b", "b1", "u1", "1", StateActive, 1, 2)}}},
		blocked: set(1, 2), kept: []string{"b"},
	}, {
		name:    "the own identity is not a peer",
		steps:   []step{{0, []Observed{leaseOf("a", "a0", "u1", "1", StateActive, 1)}}},
		blocked: set(),
	}, {
		name:    "an informer holds one object per name: the first is kept",
		steps:   []step{{0, []Observed{leaseOf("b", "b1", "u1", "1", StateActive, 1), leaseOf("b", "b2", "u2", "2", StateActive, 2)}}},
		blocked: set(1), kept: []string{"b"},
	}, {
		name: "absence is not death: a Lease gone with its claim is a tombstone",
		steps: []step{
			{0, []Observed{leaseOf("b", "b1", "u1", "1", StateActive, 1)}},
			{time.Second, nil},
		},
		blocked: set(1), tombstones: []string{"b"}, kept: []string{"b"},
	}, {
		name: "a Lease gone after publishing an empty claim is forgotten",
		steps: []step{
			{0, []Observed{leaseOf("b", "b1", "u1", "1", StateLeaving)}},
			{time.Second, nil},
		},
		blocked: set(),
	}, {
		name: "a departure reported with a claim never seen keeps that claim",
		steps: []step{
			{0, []Observed{leaseOf("b", "b1", "u1", "1", StateActive, 1)}},
			{time.Second, []Observed{gone(leaseOf("b", "b1", "u1", "2", StateActive, 1, 2))}},
		},
		blocked: set(1, 2), tombstones: []string{"b"}, kept: []string{"b"},
	}, {
		name: "a Lease recreated by another incarnation keeps the old claim as a ghost",
		steps: []step{
			{0, []Observed{leaseOf("b", "b1", "u1", "1", StateActive, 1)}},
			{time.Second, []Observed{leaseOf("b", "b2", "u2", "2", StateJoining, 2)}},
		},
		blocked: set(1, 2), kept: []string{"b"},
	}, {
		name: "the ghost expires LeaseDuration after it was learnt",
		steps: []step{
			{0, []Observed{leaseOf("b", "b1", "u1", "1", StateActive, 1)}},
			{time.Second, []Observed{leaseOf("b", "b2", "u2", "2", StateJoining, 2)}},
			{time.Second + testLease, []Observed{leaseOf("b", "b2", "u2", "2", StateJoining, 2)}},
		},
		blocked: set(2), kept: []string{"b"},
	}, {
		name: "a takeover writes over the same object: no ghost",
		steps: []step{
			{0, []Observed{leaseOf("b", "b1", "u1", "1", StateActive, 1)}},
			{time.Second, []Observed{leaseOf("b", "b2", "u1", "2", StateJoining, 2)}},
		},
		blocked: set(2), kept: []string{"b"},
	}, {
		name: "the departure of an earlier object of a name counts as a ghost",
		steps: []step{{0, []Observed{
			leaseOf("b", "b2", "u2", "2", StateJoining),
			gone(leaseOf("b", "b1", "u1", "1", StateActive, 3)),
		}}},
		blocked: set(3), kept: []string{"b"},
	}, {
		name: "an earlier object's departure covered by its incarnation's later Lease counts nothing",
		steps: []step{{0, []Observed{
			leaseOf("b", "b1", "u2", "2", StateJoining),
			gone(leaseOf("b", "b1", "u1", "1", StateActive, 3)),
		}}},
		blocked: set(), kept: []string{"b"},
	}, {
		name: "a stale view of a writer shows its newest claim",
		steps: []step{
			{0, []Observed{withGeneration(leaseOf("b", "b1", "u1", "1", StateActive, 0, 1), 3)}},
			{time.Second, []Observed{withGeneration(leaseOf("b", "b1", "u1", "2", StateActive, 0), 2)}},
		},
		blocked: set(0, 1), kept: []string{"b"},
	}, {
		name:  "with the defence off a stale view drops the claim (the mutant)",
		trust: true,
		steps: []step{
			{0, []Observed{withGeneration(leaseOf("b", "b1", "u1", "1", StateActive, 0, 1), 3)}},
			{time.Second, []Observed{withGeneration(leaseOf("b", "b1", "u1", "2", StateActive, 0), 2)}},
		},
		blocked: set(0), kept: []string{"b"},
	}, {
		name:    "a damaged Lease claims everything",
		steps:   []step{{0, []Observed{{Record: Record{Identity: "b"}, Version: "1", Problem: "no claim", ClaimUnknown: true}}}},
		blocked: shard.FullPartitionSet(testRing.Partitions), kept: []string{"b"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.trust != trustWatchOrder {
				t.Skipf("a case of the core built with trustWatchOrder %v (-tags mutant_trustwatchorder): this one is %v", tc.trust, trustWatchOrder)
			}
			v := newTestView()
			var now time.Time
			for _, s := range tc.steps {
				now = t0.Add(s.at)
				v.observe(now, s.leases)
			}
			b := newBlockers(testRing.Partitions, testRing.Fingerprint())
			v.block(now, proofs{}, &b)
			var blocked shard.PartitionSet
			if b.all {
				blocked = shard.FullPartitionSet(testRing.Partitions)
			} else {
				blocked = b.claimed
			}
			if !blocked.Equal(tc.blocked) {
				t.Errorf("blocked %v; want %v", blocked, tc.blocked)
			}
			var stones []string
			for _, o := range v.tombstones() {
				stones = append(stones, o.Identity)
			}
			if !slices.Equal(stones, tc.tombstones) {
				t.Errorf("tombstones %v; want %v", stones, tc.tombstones)
			}
			if !slices.Equal(v.ids, tc.kept) {
				t.Errorf("peers kept %v; want %v", v.ids, tc.kept)
			}
		})
	}
}

func TestLeaseHistory(t *testing.T) {
	rec := func(inc string, gen uint64) Observed {
		return withGeneration(leaseOf("b", inc, "u", "v", StateActive), gen)
	}
	for _, tc := range []struct {
		name     string
		recorded []Observed
		query    Observed
		newer    uint64 // Generation of the newer Record returned; 0: none
	}{
		{"nothing recorded", nil, rec("b1", 1), 0},
		{"a higher Generation of the writer is newer", []Observed{rec("b1", 3)}, rec("b1", 2), 3},
		{"the same Generation is not newer", []Observed{rec("b1", 3)}, rec("b1", 3), 0},
		{"a lower Generation recorded later does not replace a higher", []Observed{rec("b1", 3), rec("b1", 2)}, rec("b1", 2), 3},
		{"another incarnation's Records are not ordered against it", []Observed{rec("b2", 9)}, rec("b1", 2), 0},
		{"a damaged Lease is not recorded", []Observed{func() Observed { o := rec("b1", 5); o.Problem = "x"; return o }()}, rec("b1", 2), 0},
		{"a departed state is not recorded", []Observed{gone(rec("b1", 5))}, rec("b1", 2), 0},
		{"the incarnation seen longest ago is forgotten first",
			append([]Observed{rec("b1", 5)}, func() []Observed {
				var more []Observed
				for i := range historyDepth {
					more = append(more, rec("x"+string(rune('a'+i)), 1))
				}
				return more
			}()...), rec("b1", 2), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h leaseHistory
			for _, o := range tc.recorded {
				h.record(o)
			}
			got := uint64(0)
			if r, ok := h.newer(tc.query); ok {
				got = r.Generation
			}
			if got != tc.newer {
				t.Fatalf("newer: generation %d; want %d (0: none)", got, tc.newer)
			}
		})
	}
}

func TestMeaning(t *testing.T) {
	fp := testRing.Fingerprint()
	damaged := func(fingerprint string, state State, empty bool) Observed {
		return Observed{Record: Record{Identity: "b", State: state, Fingerprint: fingerprint}, Problem: "bad", ClaimUnknown: !empty, ClaimEmpty: empty}
	}
	for _, tc := range []struct {
		name  string
		l     Observed
		state State
		claim shard.PartitionSet
	}{
		{"a well-formed Lease means what it says", leaseOf("b", "b1", "u", "1", StateActive, 2), StateActive, set(2)},
		{"a damaged Lease of this ring is joining and claims everything", damaged(fp, StateActive, false), StateJoining, shard.FullPartitionSet(7)},
		{"a damaged Lease of another ring keeps its state, claims everything", damaged("other", StateActive, false), StateActive, shard.FullPartitionSet(7)},
		{"a damaged Lease of another ring with an empty claim blocks nothing", damaged("other", StateActive, true), StateActive, shard.NewPartitionSet(7)},
		{"a damaged Lease in an unknown state is joining", damaged("other", "weird", true), StateJoining, shard.FullPartitionSet(7)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := meaning(tc.l, fp, testRing.Partitions)
			if m.State != tc.state || !m.Claim.Equal(tc.claim) {
				t.Fatalf("state %q claim %v; want %q %v", m.State, m.Claim, tc.state, tc.claim)
			}
		})
	}
}

func TestPeerViewConfirmed(t *testing.T) {
	for _, tc := range []struct {
		name       string
		confirming bool
		departed   bool // the Lease left the view before the read
		current    string
		found      bool
		void, gone bool
		since      time.Duration // lastChange after, from t0
	}{
		{"the version judged is still current: void", true, false, "1", true, true, false, 0},
		{"the Lease moved on: its holder lives, wait again", true, false, "2", true, false, false, 2 * testLease},
		{"absence is not death: a Lease found gone becomes a tombstone", true, false, "", false, false, true, 2 * testLease},
		{"a tombstone found still gone is void", true, true, "", false, true, true, testLease / 2},
		{"an answer nobody asked for is ignored", false, false, "1", true, false, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newTestView()
			v.observe(t0, []Observed{leaseOf("b", "b1", "u1", "1", StateActive, 1)})
			if tc.departed {
				v.observe(t0.Add(testLease/2), nil)
			}
			p := v.byID["b"]
			p.confirming = tc.confirming
			v.confirmed(t0.Add(2*testLease), "b", tc.current, tc.found)
			if p.void != tc.void || p.gone != tc.gone || !p.lastChange.Equal(t0.Add(tc.since)) || p.confirming {
				t.Fatalf("void %v gone %v changed at +%v confirming %v; want void %v gone %v +%v, not confirming",
					p.void, p.gone, p.lastChange.Sub(t0), p.confirming, tc.void, tc.gone, tc.since)
			}
		})
	}
}

func TestPeerViewJudge(t *testing.T) {
	collect := newTestView().collectAfter
	for _, tc := range []struct {
		name          string
		claim         []int
		at            time.Duration
		held, void    bool
		confirm, gcol bool
	}{
		{"a live Lease is not judged", []int{1}, testLease - time.Millisecond, true, false, false, false},
		{"an expired Lease with a claim is confirmed", []int{1}, testLease, true, false, true, false},
		{"an expired empty claim needs no confirming", nil, testLease, true, false, false, false},
		{"a void Lease is not confirmed again", []int{1}, testLease, true, true, false, false},
		{"a Lease unchanged for GarbageCollectAfter is collected", nil, collect, true, false, false, true},
		{"nothing is collected before the own Lease is held", nil, collect, false, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newTestView()
			v.observe(t0, []Observed{leaseOf("b", "b1", "u1", "1", StateActive, tc.claim...)})
			v.byID["b"].void = tc.void
			var r Ready
			v.judge(t0.Add(tc.at), tc.held, &r)
			if got := len(r.Confirm) == 1; got != tc.confirm {
				t.Errorf("confirm %v; want %v", r.Confirm, tc.confirm)
			}
			if got := len(r.GarbageCollect) == 1; got != tc.gcol {
				t.Errorf("collect %v; want %v", r.GarbageCollect, tc.gcol)
			}
			var again Ready
			v.judge(t0.Add(tc.at), tc.held, &again)
			if len(again.Confirm)+len(again.GarbageCollect) != 0 {
				t.Errorf("asked again while the first ask is outstanding: %+v", again)
			}
		})
	}
}

func TestPeerViewMembersAndJoiners(t *testing.T) {
	for _, tc := range []struct {
		name    string
		l       Observed
		at      time.Duration
		member  bool
		joiner  bool // awaited as a joiner at formation
		foreign bool // a live active member of another ring configuration
		warmOf2 bool // listing(b, 2): b reports its cache without partition 2
	}{
		{name: "a live active Lease is a member", l: leaseOf("b", "b1", "u", "1", StateActive), member: true},
		{name: "an expired one is not", l: leaseOf("b", "b1", "u", "1", StateActive), at: testLease},
		{name: "a joining Lease claiming nothing is an awaited joiner", l: leaseOf("b", "b1", "u", "1", StateJoining), joiner: true},
		{name: "a joiner that claims something is not awaited", l: leaseOf("b", "b1", "u", "1", StateJoining, 3)},
		{name: "a terminating Lease is no member", l: func() Observed { o := leaseOf("b", "b1", "u", "1", StateActive); o.Terminating = true; return o }()},
		{name: "an active Lease of another ring is foreign", l: func() Observed { o := leaseOf("b", "b1", "u", "1", StateActive); o.Fingerprint = "other"; return o }(), foreign: true},
		{name: "a member reporting its cache without a partition is still listing it",
			l: func() Observed { o := leaseOf("b", "b1", "u", "1", StateActive); o.Warm = set(1); return o }(), member: true, warmOf2: true},
		{name: "one whose cache holds it is not",
			l: func() Observed { o := leaseOf("b", "b1", "u", "1", StateActive); o.Warm = set(2); return o }(), member: true},
		{name: "self sorts among members", l: leaseOf("0", "b1", "u", "1", StateActive), member: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newTestView()
			v.observe(t0, []Observed{tc.l})
			now := t0.Add(tc.at)
			want := []string(nil)
			if tc.member {
				want = []string{tc.l.Identity}
			}
			if got := v.members(now, false); !slices.Equal(got, want) {
				t.Errorf("members %v; want %v", got, want)
			}
			withSelf := slices.Sorted(slices.Values(append(slices.Clone(want), "a")))
			if got := v.members(now, true); !slices.Equal(got, withSelf) {
				t.Errorf("members with self %v; want %v", got, withSelf)
			}
			if got := v.awaitingJoiner(now); got != tc.joiner {
				t.Errorf("awaiting a joiner: %v; want %v", got, tc.joiner)
			}
			if got := v.foreignActive(now) != nil; got != tc.foreign {
				t.Errorf("foreign member: %v; want %v", got, tc.foreign)
			}
			if got := v.listing(now, tc.l.Identity, 2); got != tc.warmOf2 {
				t.Errorf("listing partition 2: %v; want %v", got, tc.warmOf2)
			}
		})
	}
}

// A peer still joining is awaited at formation for 1.5×LeaseDuration from
// when this core first saw it joining, however often it renews.
func TestPeerViewJoinerPatience(t *testing.T) {
	for _, tc := range []struct {
		at     time.Duration
		inc    string // the incarnation renewing at 1.4×LeaseDuration
		joiner bool
	}{
		{testLease * 14 / 10, "b1", true},
		{testLease * 3 / 2, "b1", false},
		{testLease * 3 / 2, "b2", true}, // another incarnation: seen joining afresh
	} {
		v := newTestView()
		v.observe(t0, []Observed{leaseOf("b", "b1", "u", "1", StateJoining)})
		v.observe(t0.Add(testLease*14/10), []Observed{leaseOf("b", tc.inc, "u", "2", StateJoining)})
		if got := v.awaitingJoiner(t0.Add(tc.at)); got != tc.joiner {
			t.Errorf("renewed by %s, at +%v: awaiting the joiner %v; want %v", tc.inc, tc.at, got, tc.joiner)
		}
	}
}

// The ring is placed by the largest weight any live Lease of this ring
// reports.
func TestPeerViewMaxWeights(t *testing.T) {
	weighted := func(id, fp string, w ...uint8) Observed {
		o := leaseOf(id, id+"1", "u-"+id, "1", StateJoining)
		o.Fingerprint, o.Weights = fp, w
		return o
	}
	fp := testRing.Fingerprint()
	v := newTestView()
	v.observe(t0, []Observed{
		weighted("b", fp, 3, 0, 5, 0, 0, 0, 0),
		weighted("c", fp, 4, 0, 1, 0, 0, 0, 0),
		weighted("d", "other", 9, 9, 9, 9, 9, 9, 9),
	})
	own := assign.Weights{0, 2, 0, 0, 0, 0, 0}
	if got, want := v.maxWeights(t0, own.Clone()), (assign.Weights{4, 2, 5, 0, 0, 0, 0}); !got.Equal(want) {
		t.Fatalf("weights %v; want %v", got, want)
	}
	if got := v.maxWeights(t0.Add(testLease), own.Clone()); !got.Equal(own) {
		t.Fatalf("weights of expired Leases count: %v", got)
	}
}
