package handoff

import (
	"testing"

	"github.com/kshard/kshard/shard"
)

func TestBlockers(t *testing.T) {
	fp := testRing.Fingerprint()
	claimOf := func(fingerprint string, claim shard.PartitionSet) *peer {
		return &peer{obs: Observed{Record: Record{Identity: "b", Claim: claim, Fingerprint: fingerprint}}}
	}
	for _, tc := range []struct {
		name    string
		peers   []*peer
		blocked shard.PartitionSet
		all     bool
	}{
		{"nothing claimed", []*peer{claimOf(fp, set())}, set(), false},
		{"claims of this ring add up", []*peer{claimOf(fp, set(1)), claimOf(fp, set(2, 3))}, set(1, 2, 3), false},
		{"a voided claim counts nothing", []*peer{func() *peer { p := claimOf(fp, set(1)); p.void = true; return p }()}, set(), false},
		{"a claim of another ring configuration blocks everything", []*peer{claimOf("other", set(1))}, set(), true},
		{"an empty claim of another configuration blocks nothing", []*peer{claimOf("other", set())}, set(), false},
		{"a claim over another partition count blocks everything", []*peer{claimOf(fp, shard.NewPartitionSet(3, 1))}, set(), true},
		{"a claim of no size claims nothing", []*peer{claimOf(fp, shard.PartitionSet{})}, set(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBlockers(testRing.Partitions, fp)
			for _, p := range tc.peers {
				b.add(p)
			}
			if b.all != tc.all || !b.claimed.Equal(tc.blocked) {
				t.Fatalf("claimed %v all %v; want %v all %v", b.claimed, b.all, tc.blocked, tc.all)
			}
			for p := range testRing.Partitions {
				if got, want := b.blocks(p), tc.all || tc.blocked.Has(p); got != want {
					t.Errorf("blocks(%d) = %v; want %v", p, got, want)
				}
			}
		})
	}
}

func TestClaimLedgerReadBack(t *testing.T) {
	// own is the own Lease as read back: a Record of generation gen
	// claiming claim.
	own := func(gen uint64, claim ...int) *Observed {
		return &Observed{Record: Record{Generation: gen, Claim: set(claim...)}}
	}
	for _, tc := range []struct {
		name  string
		steps func(l *claimLedger)
		own   *Observed
		p     int
		want  bool
	}{
		{"a partition never claimed is not read back", func(l *claimLedger) {}, own(1, 1), 1, false},
		{"a claim is read back in the Record that added it", func(l *claimLedger) { l.set(set(1)); l.commit(false) }, own(2, 1), 1, true},
		{"not in an older Record that claims it too", func(l *claimLedger) { l.set(set(1)); l.commit(false) }, own(1, 1), 1, false},
		{"nor in a newer one without it", func(l *claimLedger) { l.set(set(1)); l.commit(false) }, own(3, 2), 1, false},
		{"a partition dropped is not read back from the Record that claimed it", func(l *claimLedger) {
			l.set(set(1))
			l.commit(false)
			l.set(set())
			l.commit(false)
		}, own(2, 1), 1, false},
		{"a partition dropped and claimed again needs the newer Record", func(l *claimLedger) {
			l.set(set(1))
			l.commit(false)
			l.set(set())
			l.commit(false)
			l.set(set(1))
			l.commit(false)
		}, own(2, 1), 1, false},
		{"after a fence, only a Record of the new epoch counts", func(l *claimLedger) {
			l.set(set(1))
			l.commit(false)
			l.newEpoch()
			l.commit(false)
		}, own(2, 1), 1, false},
		{"and it does", func(l *claimLedger) {
			l.set(set(1))
			l.commit(false)
			l.newEpoch()
			l.commit(false)
		}, own(3, 1), 1, true},
		{"other changes to the Record keep what was read back", func(l *claimLedger) {
			l.set(set(1))
			l.commit(false)
			l.changed()
			l.commit(false)
		}, own(2, 1), 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newClaimLedger(testRing.Partitions)
			tc.steps(&l)
			if got := l.readBack(tc.p, tc.own); got != tc.want {
				t.Fatalf("read back %d from generation %d claiming %v: %v; want %v (claimed at %v, generation %d)",
					tc.p, tc.own.Generation, tc.own.Claim, got, tc.want, l.claimedAt, l.generation)
			}
		})
	}
}

func TestClaimLedgerGenerations(t *testing.T) {
	l := newClaimLedger(testRing.Partitions)
	if l.generation != 1 || !l.unpublished() {
		t.Fatalf("a new ledger: generation %d, unpublished %v; want 1, true", l.generation, l.unpublished())
	}
	l.commit(false)
	if l.generation != 1 {
		t.Fatalf("a step without a change started generation %d", l.generation)
	}
	l.set(set(2))
	l.set(set(2)) // the same claim again changes nothing more
	l.commit(false)
	if l.generation != 2 {
		t.Fatalf("a changed claim: generation %d; want 2", l.generation)
	}
	l.acked(2)
	l.acked(1) // an older acknowledgement does not undo a newer one
	if l.unpublished() {
		t.Fatal("acknowledged generation 2, still unpublished")
	}
	l.set(set())
	l.commit(true)
	if l.releasedAt != 3 || !l.unpublished() {
		t.Fatalf("leave's empty claim at generation %d (unpublished %v); want 3", l.releasedAt, l.unpublished())
	}
	l.changed()
	l.commit(true)
	if l.releasedAt != 3 {
		t.Fatalf("the leave's empty claim moved to generation %d", l.releasedAt)
	}
	for _, tc := range []struct {
		own  *Observed
		want bool
	}{
		{&Observed{Record: Record{State: StateLeaving, Generation: 3, Claim: set()}}, true},
		{&Observed{Record: Record{State: StateLeaving, Generation: 2, Claim: set()}}, false},
		{&Observed{Record: Record{State: StateLeaving, Generation: 3, Claim: set(2)}}, false},
		{&Observed{Record: Record{State: StateActive, Generation: 3, Claim: set()}}, false},
		{nil, false},
	} {
		if got := l.released(tc.own); got != tc.want {
			t.Errorf("released(%+v) = %v; want %v", tc.own, got, tc.want)
		}
	}
}
