package handoff

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kshard/kshard/shard"
)

// Config.KeepPlaceOnLeave: a leave that keeps the replica's place for its
// identity's next incarnation (Record.Returning), as its leaver, its peers
// and the returning incarnation see it.

func keepPlace(c *Config) { c.KeepPlaceOnLeave = true }

// withPeer brings h's core to active in a ring with b, b claiming nothing;
// it returns h's share.
func withPeer(t *testing.T, h *harness) shard.PartitionSet {
	t.Helper()
	h.c.CachesSynced()
	h.setPeer("b", StateActive)
	h.settle()
	mine := h.c.Active()
	if mine.IsEmpty() || mine.Equal(shard.FullPartitionSet(7)) {
		t.Fatalf("a active on %v with b in the ring; want a share", mine)
	}
	return mine
}

// The leaver publishes Returning with its leaving state, revokes at once
// (there is no successor to wait for: its partitions stay placed on it),
// and once its empty claim is seen it is done without deleting its Lease.
func TestLeaveKeepingItsPlace(t *testing.T) {
	h := newHarnessWith(t, "a", func(c *Config) { keepPlace(c); c.PartitionCache = true })
	h.c.PartitionsSynced(shard.FullPartitionSet(7))
	mine := withPeer(t, h)
	// b reports a cache without any of a's partitions: a successor a
	// leave without Returning would wait for (make before break).
	h.peer["b"].Warm = set()
	h.peer["b"].Version = h.version()
	h.sync()

	h.c.Leave()
	r := h.sync()
	if !r.Revoke.Equal(mine) {
		t.Fatalf("Revoke = %v; want all of %v at once, no handover", r.Revoke, mine)
	}
	if r.Publish == nil || r.Publish.State != StateLeaving || !r.Publish.Returning || !r.Publish.Claim.Equal(mine) {
		t.Fatalf("publish = %+v; want leaving, returning, still claiming %v", r.Publish, mine)
	}
	h.c.Drained(mine)
	r = h.ready()
	if r.Publish == nil || !r.Publish.Claim.IsEmpty() || !r.Publish.Returning || r.DeleteLease {
		t.Fatalf("drained: publish %+v delete %v; want the empty claim, still returning", r.Publish, r.DeleteLease)
	}
	r = h.sync()
	if r.DeleteLease || !h.c.Done() || !h.c.Returning() {
		t.Fatalf("empty claim observed: delete %v done %v returning %v; want done, the Lease left in place", r.DeleteLease, h.c.Done(), h.c.Returning())
	}
}

// A replica that was never a member has no place to keep.
func TestLeaveBeforeJoiningKeepsNoPlace(t *testing.T) {
	h := newHarnessWith(t, "a", keepPlace)
	h.sync() // joining: caches not synced
	h.c.Leave()
	h.settle()
	if h.c.Returning() || h.own == nil || h.own.Returning {
		t.Fatalf("returning %v, Lease %+v; want no place kept", h.c.Returning(), h.own)
	}
}

// Peers keep a leaver's partitions placed on it while its Lease is live,
// and take them once it expires; without Returning they take them at its
// empty claim.
func TestPeersKeepTheLeaversPlace(t *testing.T) {
	for _, returning := range []bool{false, true} {
		h := newHarness(t, "a")
		mine := withPeer(t, h)
		theirs := shard.FullPartitionSet(7).Difference(mine)
		b := h.setPeer("b", StateActive, slices.Collect(theirs.All())...)
		h.settle()
		b = h.setPeer("b", StateLeaving, slices.Collect(theirs.All())...)
		b.Returning = returning
		h.settle()
		b = h.setPeer("b", StateLeaving)
		b.Returning = returning
		got := h.settle()
		if !returning {
			if !got.Equal(theirs) {
				t.Fatalf("plain leave: activated %v at b's empty claim; want %v", got, theirs)
			}
			continue
		}
		if !got.IsEmpty() || !h.c.Target().Equal(mine) {
			t.Fatalf("b keeps its place: activated %v, target %v; want nothing new, target %v", got, h.c.Target(), mine)
		}
		h.renewFor(testLease)
		if got := h.settle(); !got.Equal(theirs) {
			t.Fatalf("b's Lease expired: activated %v; want %v", got, theirs)
		}
	}
}

// The next incarnation keeps the place while it joins; one that returns
// after its predecessor's Lease expired, its partitions moved, joins like
// any other replica: its peers keep them until it is active.
func TestPeersKeepThePlaceForTheReturningIncarnation(t *testing.T) {
	h := newHarness(t, "a")
	mine := withPeer(t, h)
	b := h.setPeer("b", StateLeaving)
	b.Returning = true
	h.settle()
	h.advance(testLease / 2)
	h.c.RenewSucceeded(h.now)
	b = h.setPeer("b", StateJoining)
	b.Incarnation, b.Returning = "inc-b2", true
	if got := h.settle(); !got.IsEmpty() || !h.c.Target().Equal(mine) {
		t.Fatalf("b returning: activated %v, target %v; want its place kept (target %v)", got, h.c.Target(), mine)
	}
	for range 10 {
		h.renewFor(time.Second)
		b.Version = h.version() // b renews while it joins
		if got := h.settle(); !got.IsEmpty() {
			t.Fatalf("returning b renewed: activated %v; want nothing", got)
		}
	}

	late := newHarness(t, "a")
	withPeer(t, late)
	b = late.setPeer("b", StateLeaving)
	b.Returning = true
	late.settle()
	late.renewFor(testLease)
	late.settle()
	if !late.c.Active().Equal(shard.FullPartitionSet(7)) {
		t.Fatalf("b's Lease expired: active %v; want everything", late.c.Active())
	}
	b = late.setPeer("b", StateJoining)
	b.Incarnation, b.Returning = "inc-b2", true
	if r := late.sync(); !r.Revoke.IsEmpty() || !late.c.Target().Equal(shard.FullPartitionSet(7)) {
		t.Fatalf("b back after its place expired: revoke %v target %v; want everything kept until it is active", r.Revoke, late.c.Target())
	}
}

// The returning incarnation takes the Lease left for it over at once and
// publishes its return, for at most LeaseDuration while it cannot become
// active; a leaving Lease that still claims something is waited out.
func TestReturningIncarnationTakesItsPlace(t *testing.T) {
	left := func(h *harness, claim ...int) *Observed {
		return &Observed{Record: Record{Identity: "a", Incarnation: "old", State: StateLeaving, Returning: true,
			Claim: set(claim...), Generation: 9, Fingerprint: testRing.Fingerprint()}, Version: h.version()}
	}
	h := newHarness(t, "a")
	h.own = left(h, 3)
	if r := h.sync(); r.TakeOver != nil || r.Publish != nil || !errors.Is(h.c.Err(), ErrIdentityInUse) {
		t.Fatalf("left Lease still claiming: take over %v publish %v err %v; want it waited out", r.TakeOver, r.Publish, h.c.Err())
	}

	h = newHarness(t, "a")
	prior := left(h)
	h.own = prior
	r := h.sync()
	if r.TakeOver == nil || r.TakeOver.Version != prior.Version || len(r.Confirm) != 0 || h.c.Err() != nil {
		t.Fatalf("left for this incarnation: take over %v confirm %v err %v; want it taken over at once", r.TakeOver, r.Confirm, h.c.Err())
	}
	if r.Publish == nil || r.Publish.State != StateJoining || !r.Publish.Returning {
		t.Fatalf("publish %+v; want joining, returning", r.Publish)
	}
	h.sync()
	// Caches never sync: the place goes back to the peers after
	// LeaseDuration.
	if r := h.pass(testLease); r.Publish == nil || r.Publish.Returning || h.c.Returning() {
		t.Fatalf("not active after LeaseDuration: publish %+v; want the place given up", r.Publish)
	}

	h = newHarness(t, "a")
	h.own = left(h)
	h.sync()
	h.c.CachesSynced()
	h.settle()
	if h.c.State() != StateActive || h.c.Returning() || h.own.Returning {
		t.Fatalf("active: state %v returning %v (Lease %v); want active and no longer returning", h.c.State(), h.c.Returning(), h.own.Returning)
	}
}
