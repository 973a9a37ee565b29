package handoff

import (
	"testing"

	"github.com/kshard/kshard/shard"
)

// newCachedHarness is newHarness with Config.PartitionCache on.
func newCachedHarness(t *testing.T, identity string) *harness {
	t.Helper()
	h := newHarness(t, identity)
	cfg := h.c.cfg
	cfg.PartitionCache = true
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.firstSeen = h.c.firstSeen
	h.c = c
	return h
}

// Synced before act: with a partitioned cache, a claimed partition that is
// free activates only once the cache reports it synced, and the claimed
// partitions are handed to the cache (Hold) as soon as they are targeted.
func TestPartitionActivatesOnlyOnceItsCacheSynced(t *testing.T) {
	h := newCachedHarness(t, "a")
	h.c.CachesSynced()
	var hold shard.PartitionSet
	for range 10 {
		r := h.sync()
		if !r.Activate.IsEmpty() {
			t.Fatalf("activated %v with nothing synced in the cache", r.Activate)
		}
		hold = r.Hold
	}
	all := shard.FullPartitionSet(7)
	if !hold.Equal(all) {
		t.Fatalf("Hold = %v after settling alone; want every partition", hold)
	}
	if w := h.c.CacheWaiting(); !w.Equal(all) {
		t.Fatalf("CacheWaiting = %v; want every partition", w)
	}
	// A LIST that finished for some ranges activates exactly those.
	h.c.PartitionsSynced(set(0, 3))
	if r := h.sync(); !r.Activate.Equal(set(0, 3)) {
		t.Fatalf("activated %v after partitions 0 and 3 synced", r.Activate)
	}
	// A slow LIST keeps the rest waiting however long it takes.
	if r := h.pass(10 * testLease); !r.Activate.IsEmpty() {
		t.Fatalf("activated %v while their LIST had not finished", r.Activate)
	}
	h.c.PartitionsSynced(all)
	if r := h.sync(); !r.Activate.Equal(all.Difference(set(0, 3))) {
		t.Fatalf("activated %v once everything synced", r.Activate)
	}
	if !h.c.CacheWaiting().IsEmpty() {
		t.Fatalf("CacheWaiting = %v with everything active", h.c.CacheWaiting())
	}
	// An active partition whose cache is restarting stays active: its
	// informer relists and delivers every object again.
	h.c.PartitionsSynced(all.Difference(set(0)))
	if r := h.sync(); !r.Revoke.IsEmpty() || !h.c.Active().Has(0) {
		t.Fatalf("revoked %v (active %v) when the cache of partition 0 resynced", r.Revoke, h.c.Active())
	}
}

// A partition gained in a rebalance is held (listed) while its old owner
// still drains it, and released partitions leave Hold only once drained.
func TestHoldFollowsTheClaim(t *testing.T) {
	h := newCachedHarness(t, "a")
	h.c.CachesSynced()
	h.c.PartitionsSynced(shard.FullPartitionSet(7))
	h.settle()
	peer := "b"
	h.setPeer(peer, StateActive)
	r := h.sync()
	share := r.Revoke
	if share.IsEmpty() {
		t.Fatal("the peer took nothing")
	}
	if !r.Hold.Equal(shard.FullPartitionSet(7)) {
		t.Fatalf("Hold = %v while %v drains; want every partition", r.Hold, share)
	}
	h.c.Drained(share)
	if r := h.ready(); !r.Hold.Intersect(share).IsEmpty() {
		t.Fatalf("Hold = %v after draining %v; want them released", r.Hold, share)
	}
}

// Without Config.PartitionCache nothing changes: no Hold, and the global
// CachesSynced is enough.
func TestFullCacheNeedsNoPartitionReports(t *testing.T) {
	h := activeAlone(t, "a")
	if r := h.sync(); r.Hold.Size() != 0 {
		t.Fatalf("Hold = %v without a partitioned cache", r.Hold)
	}
}
