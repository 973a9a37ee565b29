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
