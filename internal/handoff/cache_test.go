package handoff

import (
	"testing"
	"time"

	"github.com/kshard/kshard/internal/assign"

	"github.com/kshard/kshard/shard"
)

// newCachedHarness is newHarness with Config.PartitionCache on, and the
// Config edited by edits.
func newCachedHarness(t *testing.T, identity string, edits ...func(*Config)) *harness {
	t.Helper()
	h := newHarness(t, identity)
	cfg := h.c.cfg
	cfg.PartitionCache = true
	for _, edit := range edits {
		edit(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.join.firstSeen = h.c.join.firstSeen
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
	h := cachedAlone(t)
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

// cachedAlone brings a core with a partition cache (Config edited by
// edits) to active on all partitions, every one of them cached.
func cachedAlone(t *testing.T, edits ...func(*Config)) *harness {
	t.Helper()
	h := newCachedHarness(t, "a", edits...)
	h.c.CachesSynced()
	h.c.PartitionsSynced(shard.FullPartitionSet(7))
	h.settle()
	return h
}

// warmPeer sets peer id active, reporting its cache: warm holds the
// partitions its cache has listed.
func (h *harness) warmPeer(id string, warm ...int) {
	o := h.setPeer(id, StateActive)
	o.Warm = set(warm...)
}

// Make before break: a partition leaving the target stays active until the
// new owner's Lease shows its cache holds it, then is revoked; claims do
// not change meanwhile, so the new owner cannot activate it early.
func TestHandoverWaitsForTheNewOwnersCache(t *testing.T) {
	h := cachedAlone(t)
	h.warmPeer("b")
	r := h.sync()
	moving := h.c.HandingOver()
	if moving.IsEmpty() || !r.Revoke.IsEmpty() {
		t.Fatalf("revoked %v, handing over %v, when b joined with nothing cached; want its share kept active", r.Revoke, moving)
	}
	if !h.c.Active().Equal(shard.FullPartitionSet(7)) || !h.c.Claim().Equal(shard.FullPartitionSet(7)) {
		t.Fatalf("active %v, claim %v while handing over; want everything", h.c.Active(), h.c.Claim())
	}
	if got := h.own.Warm; !got.Equal(h.c.Target()) {
		t.Fatalf("published warm %v; want the target %v (every partition is cached)", got, h.c.Target())
	}
	// b's cache lists the first partition: that one goes, the rest stay.
	first := moving.Slice()[0]
	h.warmPeer("b", first)
	r = h.sync()
	if !r.Revoke.Equal(set(first)) || !h.c.HandingOver().Equal(moving.Difference(set(first))) {
		t.Fatalf("revoked %v, still handing over %v after b cached %d", r.Revoke, h.c.HandingOver(), first)
	}
	h.warmPeer("b", moving.Slice()...)
	if r = h.sync(); !r.Revoke.Equal(moving.Difference(set(first))) || !h.c.HandingOver().IsEmpty() {
		t.Fatalf("revoked %v, still handing over %v once b cached everything", r.Revoke, h.c.HandingOver())
	}
}

// The wait is bounded: a new owner whose cache never lists a partition gets
// it after HandoverTimeout, and NextDeadline wakes the shell for that.
func TestHandoverGivesUpAfterItsTimeout(t *testing.T) {
	h := cachedAlone(t)
	h.warmPeer("b")
	h.sync()
	moving := h.c.HandingOver()
	if moving.IsEmpty() {
		t.Fatal("nothing is handed over to b")
	}
	if next, ok := h.c.NextDeadline(); !ok || next.After(h.now.Add(testLease)) {
		t.Fatalf("NextDeadline = %v, %v; want the handover's timeout within %v", next, ok, testLease)
	}
	h.renewFor(testLease - time.Second)
	// b renews without caching anything: still waiting.
	h.warmPeer("b")
	if r := h.sync(); !r.Revoke.IsEmpty() {
		t.Fatalf("revoked %v before the handover timeout", r.Revoke)
	}
	h.renewFor(time.Second)
	h.warmPeer("b")
	if r := h.sync(); !r.Revoke.Equal(moving) || !h.c.HandingOver().IsEmpty() {
		t.Fatalf("revoked %v at the handover timeout; want %v", r.Revoke, moving)
	}
}

// A new owner that does not report its cache (a full cache, an older
// kshard), or a replica with the wait turned off, hands over at once, as
// before make before break.
func TestHandoverIsImmediateWithoutWarmReports(t *testing.T) {
	h := cachedAlone(t)
	h.setPeer("b", StateActive) // no Warm: size 0
	if r := h.sync(); r.Revoke.IsEmpty() || !h.c.HandingOver().IsEmpty() {
		t.Fatalf("revoked %v, handing over %v to a peer that reports no cache", r.Revoke, h.c.HandingOver())
	}

	h = cachedAlone(t, func(c *Config) { c.HandoverTimeout = -1 })
	h.warmPeer("b")
	if r := h.sync(); r.Revoke.IsEmpty() || !h.c.HandingOver().IsEmpty() {
		t.Fatalf("revoked %v, handing over %v with HandoverTimeout < 0", r.Revoke, h.c.HandingOver())
	}
}

// A graceful leave hands over the same way: everything stays active until
// the new owners' caches hold it, and the leave completes after that.
func TestLeaveHandsOverToWarmOwners(t *testing.T) {
	h := cachedAlone(t)
	h.warmPeer("b", 0, 1, 2, 3, 4, 5, 6)
	h.settle() // b takes its share
	h.c.Drained(h.c.Draining())
	h.settle()
	mine := h.c.Active()
	h.c.Leave()
	h.warmPeer("b")
	if r := h.sync(); !r.Revoke.IsEmpty() || !h.c.Active().Equal(mine) {
		t.Fatalf("leaving, revoked %v (active %v) before b cached anything", r.Revoke, h.c.Active())
	}
	h.warmPeer("b", mine.Slice()...)
	if r := h.sync(); !r.Revoke.Equal(mine) {
		t.Fatalf("leaving, revoked %v once b cached %v", r.Revoke, mine)
	}
}

// A balanced ring (shard.Config.Balance): the core publishes the quantized
// counts of the partitions its cache has synced, keeps a weight the view
// already has while its count stays within the hysteresis, and places the
// ring by the largest weight any live Lease reports.
func TestBalancedCorePublishesAndPlacesByWeights(t *testing.T) {
	ring := shard.Config{Partitions: 7, ReplicationFactor: 4, Scheme: shard.SchemeNamespace, Balance: 0.05}
	h := cachedAlone(t, func(c *Config) { c.Ring = ring })
	counts := []int{10, 0, 3, 3, 3, 3, 50}
	// Counted before partition 3 synced: it is left out.
	h.c.ObjectsCounted(shard.FullPartitionSet(7).Difference(set(3)), counts)
	h.settle()
	want := assign.Weights{assign.WeightBucket(10), assign.WeightBucket(0), assign.WeightBucket(3), 0, assign.WeightBucket(3), assign.WeightBucket(3), assign.WeightBucket(50)}
	if got := h.own.Weights; !got.Equal(want) {
		t.Fatalf("published weights %v; want %v", got, want)
	}
	// Within the hysteresis (a bucket or two): the published weight stays.
	h.c.ObjectsCounted(shard.FullPartitionSet(7), []int{11, 0, 3, 3, 3, 3, 58})
	h.settle()
	want[3] = assign.WeightBucket(3)
	if got := h.own.Weights; !got.Equal(want) {
		t.Fatalf("published weights %v after small changes; want %v", got, want)
	}
	// Beyond it the new count is published.
	h.c.ObjectsCounted(shard.FullPartitionSet(7), []int{40, 0, 3, 3, 3, 3, 58})
	h.settle()
	if got := h.own.Weights[0]; got != assign.WeightBucket(40) {
		t.Fatalf("published weight %d for partition 0 at 40 objects; want %d", got, assign.WeightBucket(40))
	}
	// A peer joins reporting a heavier partition 0 (it holds a newer,
	// larger count): both place by the largest report.
	b := h.setPeer("b", StateActive)
	b.Fingerprint = ring.Fingerprint()
	b.Weights = assign.Weights{assign.WeightBucket(300), 0, 0, 0, 0, 0, 0}
	h.sync()
	merged := assign.MaxWeights(assign.MaxWeights(nil, h.own.Weights, 7), b.Weights, 7)
	expect, err := assign.NewWeighted(ring, []string{"a", "b"}, merged)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.c.Target(); !got.Equal(expect.Partitions("a")) {
		t.Fatalf("target %v; the ring of the largest reports gives a %v", got, expect.Partitions("a"))
	}
	plain, _ := assign.New(ring, []string{"a", "b"})
	if expect.Partitions("a").Equal(plain.Partitions("a")) {
		t.Fatal("the weights do not change this ring; the test shows nothing")
	}
	// A replica that is not balanced publishes none.
	h = cachedAlone(t)
	h.c.ObjectsCounted(shard.FullPartitionSet(7), counts)
	h.settle()
	if h.own.Weights != nil {
		t.Fatalf("weights %v published without Balance", h.own.Weights)
	}
}
