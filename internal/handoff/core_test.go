package handoff

import (
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/kshard/kshard/internal/assign"

	"github.com/kshard/kshard/shard"
)

// testRing is small so that claims read easily: P=7.
var testRing = shard.Config{Partitions: 7, ReplicationFactor: 4}

const (
	testLease    = 10 * time.Second
	testDeadline = 6 * time.Second
)

// harness drives one Core by hand, playing its shell: it keeps the Lease
// content the core published and can show it back through Observe.
type harness struct {
	t    *testing.T
	c    *Core
	now  time.Time
	rv   int
	own  *Observed            // own Lease as stored, nil before the first write
	peer map[string]*Observed // peers' Leases as stored
}

func newHarness(t *testing.T, identity string) *harness {
	t.Helper()
	return newHarnessWith(t, identity, func(*Config) {})
}

// newHarnessWith is newHarness with the Config edited by edit first.
func newHarnessWith(t *testing.T, identity string, edit func(*Config)) *harness {
	t.Helper()
	cfg := Config{Identity: identity, Incarnation: "inc-" + identity, Ring: testRing,
		Timing: Timing{LeaseDuration: testLease, RenewDeadline: testDeadline}}
	edit(&cfg)
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, c: c, now: time.Unix(1000, 0), peer: map[string]*Observed{}}
	// As if the informer had listed LeaseDuration ago: the wait before
	// joining (see TestJoinWaitsALeaseDurationOfWatching) is over.
	c.join.firstSeen = h.now.Add(-testLease)
	return h
}

func (h *harness) advance(d time.Duration) { h.now = h.now.Add(d) }

// renewFor lets d go by while the own Lease keeps being renewed every
// second, without stepping the core: a single renew after a gap longer
// than RenewDeadline would fence it (see TestRenewAfterAGapFences).
func (h *harness) renewFor(d time.Duration) {
	for d > 0 {
		step := min(d, time.Second)
		h.advance(step)
		d -= step
		h.c.RenewSucceeded(h.now)
	}
}

// pass lets d go by while the own Lease keeps being renewed every second,
// stepping the core without new observations; it returns what those steps
// asked for, merged.
func (h *harness) pass(d time.Duration) Ready {
	h.t.Helper()
	all := Ready{Activate: shard.NewPartitionSet(testRing.Partitions), Revoke: shard.NewPartitionSet(testRing.Partitions)}
	for d > 0 {
		step := min(d, time.Second)
		h.advance(step)
		d -= step
		h.c.RenewSucceeded(h.now)
		r := h.c.Ready(h.now)
		h.c.Advance(r)
		all.Fence = all.Fence || r.Fence
		all.Exit = all.Exit || r.Exit
		all.Activate = all.Activate.Union(r.Activate)
		all.Revoke = all.Revoke.Union(r.Revoke)
		all.Confirm = append(all.Confirm, r.Confirm...)
		if r.Publish != nil {
			all.Publish = r.Publish
		}
	}
	return all
}

func (h *harness) version() string { h.rv++; return strconv.Itoa(h.rv) }

// ready runs a step; a Publish is "written" (stored, not yet observed) and
// counts as a successful renew sent now.
func (h *harness) ready() Ready {
	h.t.Helper()
	r := h.c.Ready(h.now)
	if r.Publish != nil {
		h.own = &Observed{Record: r.Publish.Clone(), Version: h.version()}
		h.c.RenewSucceeded(h.now)
	}
	h.c.Advance(r)
	return r
}

// snapshot returns what the informer would hold: the stored Leases, with
// the own one replaced by stale when given.
func (h *harness) snapshot(stale *Observed) []Observed {
	var out []Observed
	own := h.own
	if stale != nil {
		own = stale
	}
	if own != nil {
		out = append(out, *own)
	}
	ids := make([]string, 0, len(h.peer))
	for id := range h.peer {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		out = append(out, *h.peer[id])
	}
	return out
}

// sync lets the informer catch up with everything stored and steps.
func (h *harness) sync() Ready {
	h.t.Helper()
	h.c.Observe(h.now, h.snapshot(nil))
	return h.ready()
}

// settle syncs until nothing is published any more, collecting activations.
func (h *harness) settle() shard.PartitionSet {
	h.t.Helper()
	activated := shard.NewPartitionSet(testRing.Partitions)
	for range 10 {
		r := h.sync()
		activated = activated.Union(r.Activate)
		if r.Publish == nil {
			return activated
		}
	}
	h.t.Fatal("core does not settle")
	return activated
}

func (h *harness) setPeer(id string, state State, claim ...int) *Observed {
	o := &Observed{Record: Record{Identity: id, Incarnation: "inc-" + id, State: state,
		Claim: shard.NewPartitionSet(testRing.Partitions, claim...), Generation: 1,
		Fingerprint: testRing.Fingerprint()}, Version: h.version()}
	h.peer[id] = o
	return o
}

// activeAlone brings the harness's core to active on all partitions.
func activeAlone(t *testing.T, identity string) *harness {
	t.Helper()
	h := newHarness(t, identity)
	h.c.CachesSynced()
	if got := h.settle(); !got.Equal(shard.FullPartitionSet(7)) {
		t.Fatalf("alone, activated %v; want everything", got)
	}
	return h
}

func set(p ...int) shard.PartitionSet { return shard.NewPartitionSet(testRing.Partitions, p...) }

func TestNewRejectsImpossibleConfigs(t *testing.T) {
	good := Config{Identity: "a", Incarnation: "x"}
	for name, mutate := range map[string]func(*Config){
		"no identity":               func(c *Config) { c.Identity = "" },
		"no incarnation":            func(c *Config) { c.Incarnation = "" },
		"negative lease":            func(c *Config) { c.LeaseDuration = -time.Second },
		"deadline at lease":         func(c *Config) { c.LeaseDuration, c.RenewDeadline = time.Second, time.Second },
		"deadline beyond lease":     func(c *Config) { c.LeaseDuration, c.RenewDeadline = time.Second, 2*time.Second },
		"gc before expiry":          func(c *Config) { c.GarbageCollectAfter = time.Second },
		"invalid ring":              func(c *Config) { c.Ring.Load = 0.5 },
		"too many ring partitions":  func(c *Config) { c.Ring.Partitions = shard.MaxPartitions + 1 },
		"negative renew deadline":   func(c *Config) { c.RenewDeadline = -1 },
		"negative replication":      func(c *Config) { c.Ring.ReplicationFactor = -1 },
		"negative ring partitions":  func(c *Config) { c.Ring.Partitions = -3 },
		"gc negative":               func(c *Config) { c.GarbageCollectAfter = -1 },
		"lease shorter than gc min": func(c *Config) { c.LeaseDuration, c.GarbageCollectAfter = time.Minute, time.Second },
	} {
		cfg := good
		mutate(&cfg)
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
	if _, err := New(good); err != nil {
		t.Fatalf("defaults rejected: %v", err)
	}
}

// Rule 1, claim before act: a partition becomes active only after the own
// Lease has been observed claiming it, never on the strength of a write.
func TestClaimBeforeAct(t *testing.T) {
	h := newHarness(t, "a")
	h.c.CachesSynced()
	if r := h.ready(); r.Publish != nil {
		t.Fatal("published before the informer listed: a previous incarnation may hold the Lease")
	}
	r := h.sync()
	if r.Publish == nil || r.Publish.State != StateJoining || !r.Publish.Claim.IsEmpty() {
		t.Fatalf("first publish = %+v; want joining with an empty claim", r.Publish)
	}
	var claimed bool
	for range 5 {
		r := h.sync()
		if r.Publish != nil && !r.Publish.Claim.IsEmpty() {
			claimed = true
			if !r.Activate.IsEmpty() {
				t.Fatalf("activated %v in the step that claimed it", r.Activate)
			}
			// The write is stored but not observed yet.
			if r := h.ready(); !r.Activate.IsEmpty() {
				t.Fatalf("activated %v before observing the own claim", r.Activate)
			}
			if r := h.sync(); !r.Activate.Equal(shard.FullPartitionSet(7)) {
				t.Fatalf("after observing the claim, activated %v; want everything", r.Activate)
			}
			break
		}
	}
	if !claimed {
		t.Fatal("never claimed anything")
	}
}

// Rule 1(b): any live Lease's claim blocks, whatever its state.
func TestClaimsOfEveryStateBlock(t *testing.T) {
	for _, state := range []State{StateJoining, StateLeaving, "garbled"} {
		h := newHarness(t, "a")
		h.c.CachesSynced()
		h.setPeer("b", state, 2, 5)
		got := h.settle()
		if !got.Equal(set(0, 1, 3, 4, 6)) {
			t.Errorf("peer %s claiming {2,5}: activated %v", state, got)
		}
		if !h.c.Blocked().Equal(set(2, 5)) {
			t.Errorf("peer %s: Blocked = %v; want {2,5}", state, h.c.Blocked())
		}
		// Its Lease is deleted by hand: absence is not death, the claim
		// stays in force for LeaseDuration of observed time, then is
		// confirmed gone.
		delete(h.peer, "b")
		if got := h.settle(); !got.IsEmpty() || !h.c.Blocked().Equal(set(2, 5)) {
			t.Errorf("peer %s just gone: activated %v blocked %v; want nothing, {2,5}", state, got, h.c.Blocked())
		}
		if r := h.pass(testLease - time.Millisecond); len(r.Confirm) != 0 || !r.Activate.IsEmpty() || r.Fence {
			t.Errorf("peer %s gone for less than LeaseDuration: %+v", state, r)
		}
		r := h.pass(time.Millisecond)
		if len(r.Confirm) != 1 || r.Confirm[0].Identity != "b" {
			t.Fatalf("peer %s gone for LeaseDuration: confirm %v", state, r.Confirm)
		}
		h.c.Confirmed("b", "", false)
		if got := h.settle(); !got.Equal(set(2, 5)) {
			t.Errorf("peer %s confirmed gone: activated %v; want {2,5}", state, got)
		}
	}
}

// Rule 1, read-your-write: an observed own Record proves a claim only if it
// is at least as new as the write that (last) added the partition. Here the
// membership flaps A → AB → A while the watch lags: the observed Record still
// claims b's share from before b joined, but a later, unobserved Record
// dropped it. Activating on the old Record would let b (or anyone seeing the
// later Record) take the same partitions.
func TestReadBackNeedsTheWriteThatAddedThePartition(t *testing.T) {
	h := activeAlone(t, "a")
	beforeJoin := *h.own // claims everything

	h.setPeer("b", StateActive)
	r := h.sync()
	share := r.Revoke
	if share.IsEmpty() {
		t.Fatal("b joined but a revoked nothing")
	}
	h.c.Drained(share)
	r = h.ready()
	if r.Publish == nil || !r.Publish.Claim.Intersect(share).IsEmpty() {
		t.Fatalf("after drain, publish = %+v; want a claim without %v", r.Publish, share)
	}

	// b leaves before a observes its own release; a's informer still holds
	// the Record from before b joined.
	delete(h.peer, "b")
	h.c.Observe(h.now, h.snapshot(&beforeJoin))
	r = h.ready()
	if r.Publish == nil || !r.Publish.Claim.Equal(shard.FullPartitionSet(7)) {
		t.Fatalf("b gone: publish = %+v; want everything claimed again", r.Publish)
	}
	if !r.Activate.IsEmpty() {
		t.Fatalf("activated %v on a Record older than the one that re-added them", r.Activate)
	}
	if r := h.sync(); !r.Activate.Equal(share) {
		t.Fatalf("after observing the re-claim, activated %v; want %v", r.Activate, share)
	}
}

// Rule 1, confirm before void: a peer whose Lease looks expired keeps
// blocking until a direct read shows that Lease unchanged; a lagging watch
// must never make a healthy peer look dead.
func TestConfirmBeforeVoid(t *testing.T) {
	h := newHarness(t, "a")
	h.c.CachesSynced()
	b := h.setPeer("b", StateLeaving, 3)
	h.settle()
	if h.c.Active().Has(3) {
		t.Fatal("activated 3 while b claims it")
	}

	// The watch shows nothing new for a LeaseDuration (renew a's own Lease
	// meanwhile, so that it stays unfenced).
	h.advance(testLease / 2)
	h.c.RenewSucceeded(h.now)
	h.advance(testLease / 2)
	h.c.RenewSucceeded(h.now)
	r := h.ready()
	if len(r.Confirm) != 1 || r.Confirm[0] != (LeaseRef{Identity: "b", Version: b.Version}) {
		t.Fatalf("Confirm = %v; want b@%s", r.Confirm, b.Version)
	}
	if !r.Activate.IsEmpty() {
		t.Fatalf("activated %v on expiry alone", r.Activate)
	}
	if r := h.ready(); len(r.Confirm) != 0 {
		t.Fatalf("asked again while the first read is outstanding: %v", r.Confirm)
	}

	// The direct read shows b has moved on: b is alive, the watch lags.
	h.c.Confirmed("b", "999", true)
	if r := h.ready(); !r.Activate.IsEmpty() || len(r.Confirm) != 0 {
		t.Fatalf("after a read showing b alive: activate %v, confirm %v", r.Activate, r.Confirm)
	}

	// Another LeaseDuration of silence; the read fails, then is retried.
	h.renewFor(testLease)
	if r := h.ready(); len(r.Confirm) != 1 {
		t.Fatalf("Confirm = %v after another LeaseDuration", r.Confirm)
	}
	h.c.ConfirmFailed("b")
	if r := h.ready(); len(r.Confirm) != 1 || !r.Activate.IsEmpty() {
		t.Fatalf("after a failed read: confirm %v, activate %v", r.Confirm, r.Activate)
	}

	// A read of a version the core no longer holds proves nothing... but
	// this one is current and unchanged: b's claims are void.
	h.c.Confirmed("b", b.Version, true)
	if r := h.ready(); !r.Activate.Equal(set(3)) {
		t.Fatalf("after confirmed expiry, activated %v; want {3}", r.Activate)
	}

}

// A void lasts only as long as the Lease version it rests on.
func TestVoidEndsWhenTheLeaseChanges(t *testing.T) {
	h := newHarness(t, "a") // caches not synced: a stays joining for now
	b := h.setPeer("b", StateLeaving, 3)
	h.settle()
	h.renewFor(testLease)
	if r := h.ready(); len(r.Confirm) != 1 {
		t.Fatalf("Confirm = %v", r.Confirm)
	}
	h.c.Confirmed("b", b.Version, true)
	h.ready()
	h.setPeer("b", StateLeaving, 3) // b renews after all
	h.c.CachesSynced()
	if got := h.settle(); got.Has(3) || !h.c.Blocked().Equal(set(3)) {
		t.Fatalf("b's Lease changed after the void: activated %v, blocked %v; want 3 blocked", got, h.c.Blocked())
	}
}

// A Lease that looked expired (the watch showed no change for LeaseDuration)
// and that a direct read finds gone may have been deleted by hand a moment
// ago while its holder runs: the watch lagged. It is a tombstone from the
// read on: its claims count for another LeaseDuration, then a read that
// still finds it gone voids them.
func TestConfirmOfDeletedLeaseWaitsAsTombstone(t *testing.T) {
	h := newHarness(t, "a")
	h.c.CachesSynced()
	h.setPeer("b", StateJoining, 0, 1)
	h.settle()
	h.renewFor(testLease)
	if r := h.ready(); len(r.Confirm) != 1 {
		t.Fatalf("Confirm = %v", r.Confirm)
	}
	h.c.Confirmed("b", "", false)
	// The lagging watch still shows b's Lease, unchanged.
	r := h.sync()
	r.Activate = r.Activate.Union(h.pass(testLease - time.Second).Activate)
	if !r.Activate.IsEmpty() {
		t.Fatalf("b's Lease was found gone less than LeaseDuration ago: activated %v", r.Activate)
	}
	r = h.pass(time.Second)
	if len(r.Confirm) != 1 || r.Confirm[0].Identity != "b" {
		t.Fatalf("a LeaseDuration after finding b's Lease gone: Confirm = %v, want one of b", r.Confirm)
	}
	h.c.Confirmed("b", "", false)
	if r := h.sync(); !r.Activate.Equal(set(0, 1)) {
		t.Fatalf("b's Lease is still gone a LeaseDuration on: activated %v; want {0,1}", r.Activate)
	}
}

func TestConfirmedForStaleVersionIsIgnored(t *testing.T) {
	h := newHarness(t, "a")
	h.c.CachesSynced()
	b := h.setPeer("b", StateLeaving, 4)
	h.settle()
	h.renewFor(testLease)
	h.ready()
	// Before the answer arrives the watch shows a new version of b.
	h.setPeer("b", StateLeaving, 4)
	h.sync()
	h.c.Confirmed("b", b.Version, true) // about the old version
	if r := h.ready(); !r.Activate.IsEmpty() {
		t.Fatalf("voided b's new Lease on a read about its old one: activated %v", r.Activate)
	}
}

// Rule 2, drain before release.
func TestDrainBeforeRelease(t *testing.T) {
	// A peer whose share of the ring beside a holds at least two
	// partitions, so that a partial drain can be told from a full one.
	peer := ""
	for i := range 100 {
		id := "b" + strconv.Itoa(i)
		ring, err := assign.New(testRing, []string{"a", id})
		if err != nil {
			t.Fatal(err)
		}
		if ring.Partitions(id).Len() >= 2 {
			peer = id
			break
		}
	}
	if peer == "" {
		t.Fatal("no peer name among b0..b99 gets two partitions of the test ring")
	}
	h := activeAlone(t, "a")
	h.setPeer(peer, StateActive)
	r := h.sync()
	share := r.Revoke
	if share.Len() < 2 {
		t.Fatalf("%s's share %v: the ring disagrees with assign.New", peer, share)
	}
	if r.Publish != nil && !share.Difference(r.Publish.Claim).IsEmpty() {
		t.Fatalf("released %v on revoke", share.Difference(r.Publish.Claim))
	}
	if !h.c.Claim().Intersect(share).Equal(share) || !h.c.Draining().Equal(share) {
		t.Fatalf("claim %v draining %v; want both to hold %v", h.c.Claim(), h.c.Draining(), share)
	}
	first := share.Slice()[0]
	h.c.Drained(set(first))
	r = h.ready()
	if r.Publish == nil || r.Publish.Claim.Has(first) || !r.Publish.Claim.Intersect(share).Equal(share.Difference(set(first))) {
		t.Fatalf("after draining %d: publish %+v", first, r.Publish)
	}
	h.c.Drained(share)
	if r := h.ready(); r.Publish == nil || !r.Publish.Claim.Intersect(share).IsEmpty() {
		t.Fatalf("after draining all: publish %+v", r.Publish)
	}
}

// Rule 4, graceful leave.
func TestLeaveSequence(t *testing.T) {
	h := activeAlone(t, "a")
	h.c.Leave()
	r := h.ready()
	if !r.Revoke.Equal(shard.FullPartitionSet(7)) {
		t.Fatalf("Revoke = %v; want everything", r.Revoke)
	}
	if r.Publish == nil || r.Publish.State != StateLeaving || !r.Publish.Claim.Equal(shard.FullPartitionSet(7)) {
		t.Fatalf("publish = %+v; want leaving, still claiming everything", r.Publish)
	}
	h.c.Drained(set(0, 1, 2))
	if r := h.sync(); r.DeleteLease {
		t.Fatal("deleted the Lease while draining")
	}
	h.c.Drained(shard.FullPartitionSet(7))
	r = h.ready()
	if r.Publish == nil || !r.Publish.Claim.IsEmpty() || r.DeleteLease {
		t.Fatalf("drained: publish %+v delete %v; want the empty claim first", r.Publish, r.DeleteLease)
	}
	if r := h.ready(); r.DeleteLease {
		t.Fatal("deleted the Lease before observing the empty claim")
	}
	if r := h.sync(); !r.DeleteLease || !h.c.Done() {
		t.Fatalf("observed the empty claim: delete %v done %v", r.DeleteLease, h.c.Done())
	}
	if r := h.sync(); !r.IsEmpty() {
		t.Fatalf("done core still asks for %+v", r)
	}
}

func TestLeaveBeforeWritingAnything(t *testing.T) {
	h := newHarness(t, "a")
	h.c.Leave()
	if r := h.ready(); r.DeleteLease || r.Publish != nil || !h.c.Done() {
		t.Fatalf("leave before the first list: %+v done %v", r, h.c.Done())
	}
}

// Rule 5, fencing: no renew within RenewDeadline → drop everything, keep
// the claims until drained, start a new epoch, rejoin after a renew.
func TestFenceAndRejoin(t *testing.T) {
	h := activeAlone(t, "a")
	beforeFence := *h.own
	gen := h.c.Generation()
	h.advance(testDeadline - time.Millisecond)
	if r := h.ready(); r.Fence {
		t.Fatal("fenced before the deadline")
	}
	h.advance(time.Millisecond)
	r := h.c.Ready(h.now) // the write would fail: nothing is stored
	if !r.Fence || !r.Revoke.Equal(shard.FullPartitionSet(7)) || !h.c.Active().IsEmpty() || !h.c.Fenced() {
		t.Fatalf("at the deadline: fence %v revoke %v active %v", r.Fence, r.Revoke, h.c.Active())
	}
	if r.Publish == nil || r.Publish.State != StateJoining || !r.Publish.Claim.Equal(shard.FullPartitionSet(7)) || r.Publish.Generation <= gen {
		t.Fatalf("fence publish = %+v; want joining, claims kept until drained, new generation", r.Publish)
	}
	h.c.Drained(shard.FullPartitionSet(7))
	r = h.c.Ready(h.now)
	if r.Publish == nil || !r.Publish.Claim.IsEmpty() {
		t.Fatalf("drained after fence: publish %+v", r.Publish)
	}

	// Renews work again. The informer still shows the pre-fence Record,
	// active and claiming everything: it must not count for the new epoch.
	h.advance(time.Second)
	h.ready()
	h.c.RenewSucceeded(h.now)
	h.c.Observe(h.now, h.snapshot(&beforeFence))
	r = h.ready()
	if !r.Activate.IsEmpty() {
		t.Fatalf("activated %v on a Record from before the fence", r.Activate)
	}
	if got := h.settle(); !got.Equal(shard.FullPartitionSet(7)) {
		t.Fatalf("rejoined: activated %v; want everything", got)
	}
}

// A process paused past RenewDeadline can, on resuming, learn of a renew it
// sent after the pause before its first step: that renew makes it look
// recently renewed, but peers may have voided its claims during the gap, so
// it must fence all the same.
func TestRenewAfterAGapFences(t *testing.T) {
	h := activeAlone(t, "a")
	lastSent := h.now
	h.now = lastSent.Add(testDeadline + time.Second) // resumed
	h.c.RenewSucceeded(h.now.Add(-time.Millisecond)) // sent after the pause
	r := h.c.Ready(h.now)
	if !r.Fence || !h.c.Active().IsEmpty() {
		t.Fatalf("renew sent %v after the previous one (RenewDeadline %v): fence %v, active %v; want fenced, nothing active",
			h.now.Sub(lastSent), testDeadline, r.Fence, h.c.Active())
	}
	// A renew within the deadline of the previous one is no gap.
	h2 := activeAlone(t, "b")
	h2.advance(testDeadline - time.Millisecond)
	h2.c.RenewSucceeded(h2.now)
	if r := h2.c.Ready(h2.now); r.Fence {
		t.Fatal("fenced on a renew sent within RenewDeadline of the previous one")
	}
}

// After a fence, even partitions that stayed claimed throughout (their drain
// outlasted the outage) need a Record of the new epoch: peers may have voided
// every Record written before the fence.
func TestReadBackAfterFenceNeedsTheNewEpoch(t *testing.T) {
	h := activeAlone(t, "a")
	beforeFence := *h.own
	h.advance(testDeadline)
	if r := h.c.Ready(h.now); !r.Fence {
		t.Fatal("not fenced")
	}
	h.advance(time.Second)
	h.ready() // the fence Record is written now
	h.c.RenewSucceeded(h.now)
	h.c.Observe(h.now, h.snapshot(&beforeFence))
	h.ready()
	h.c.Drained(shard.FullPartitionSet(7)) // drained while still targeted and claimed
	if r := h.ready(); !r.Activate.IsEmpty() {
		t.Fatalf("activated %v on a Record from before the fence", r.Activate)
	}
	if got := h.settle(); !got.Equal(shard.FullPartitionSet(7)) {
		t.Fatalf("activated %v; want everything once the new epoch is observed", got)
	}
}

// A fenced replica whose reconciles do not stop by the stop deadline must
// exit, even if renews succeed again in between: a peer may have voided its
// claims before its Lease changed.
func TestFencedReplicaExitsWhenReconcilesOutliveTheStopDeadline(t *testing.T) {
	h := activeAlone(t, "a")
	lastSent := h.now
	h.advance(testDeadline)
	if r := h.c.Ready(h.now); !r.Fence {
		t.Fatal("not fenced")
	}
	h.c.Drained(set(0, 1, 2, 3, 4, 5)) // partition 6 ignores cancellation
	h.advance(time.Second)
	h.ready()
	h.c.RenewSucceeded(h.now) // back online
	h.now = lastSent.Add(h.c.cfg.StopDeadline() - time.Millisecond)
	if r := h.c.Ready(h.now); r.Exit {
		t.Fatal("exit before the stop deadline")
	}
	h.now = lastSent.Add(h.c.cfg.StopDeadline())
	if r := h.c.Ready(h.now); !r.Exit || !h.c.Done() {
		t.Fatalf("partition 6 still running at the stop deadline: exit %v", r.Exit)
	}
}

func TestFencedReplicaThatStopsInTimeDoesNotExit(t *testing.T) {
	h := activeAlone(t, "a")
	h.advance(testDeadline)
	h.c.Ready(h.now)
	h.c.Drained(shard.FullPartitionSet(7))
	h.advance(testLease)
	if r := h.c.Ready(h.now); r.Exit || h.c.Done() {
		t.Fatal("exit although every reconcile stopped")
	}
}

// Rule 6: members with another ring configuration are not in the view, their
// claims block everything, and this replica refuses to join while one is
// active.
func TestForeignFingerprint(t *testing.T) {
	h := newHarness(t, "a")
	h.c.CachesSynced()
	x := h.setPeer("x", StateActive, 1)
	x.Fingerprint = "xx1-p13-l1.25-r4"
	h.settle()
	if h.c.State() != StateJoining {
		t.Fatalf("state %s; want joining while a foreign member is active", h.c.State())
	}
	if err := h.c.Err(); !errors.Is(err, ErrForeignFingerprint) {
		t.Fatalf("Err = %v; want ErrForeignFingerprint", err)
	}

	// The foreign member steps back to joining but still claims something.
	x.State = StateJoining
	x.Version = h.version()
	if got := h.settle(); !got.IsEmpty() {
		t.Fatalf("activated %v while a foreign Lease claims partitions", got)
	}
	if h.c.State() != StateActive || !h.c.Blocked().Equal(shard.FullPartitionSet(7)) {
		t.Fatalf("state %s blocked %v; want active, everything blocked", h.c.State(), h.c.Blocked())
	}
	if slices.Contains(h.c.View(), "x") {
		t.Fatal("foreign member in the view")
	}
	x.Claim = shard.NewPartitionSet(7)
	x.Version = h.version()
	if got := h.settle(); !got.Equal(shard.FullPartitionSet(7)) || h.c.Err() != nil {
		t.Fatalf("foreign claim empty: activated %v err %v", got, h.c.Err())
	}
}

// A claim over another partition count cannot be read: it blocks everything.
func TestClaimOfOtherSizeBlocksEverything(t *testing.T) {
	h := newHarness(t, "a")
	h.c.CachesSynced()
	b := h.setPeer("b", StateActive)
	b.Claim = shard.NewPartitionSet(13, 12)
	if got := h.settle(); !got.IsEmpty() {
		t.Fatalf("activated %v beside an unreadable claim", got)
	}
}

// The own Lease is taken like a lock: a live Lease of another incarnation is
// waited out, confirmed expired, and taken over by a write conditioned on the
// version judged (the one path production and simulation share).
func TestPreviousIncarnationIsWaitedOut(t *testing.T) {
	h := newHarness(t, "a")
	h.c.CachesSynced()
	prev := &Observed{Record: Record{Identity: "a", Incarnation: "old", State: StateActive,
		Claim: set(0, 1, 2, 3, 4, 5, 6), Generation: 9, Fingerprint: testRing.Fingerprint()}, Version: h.version()}
	h.own = prev
	if r := h.sync(); r.Publish != nil {
		t.Fatal("wrote over a live Lease of another incarnation")
	}
	if err := h.c.Err(); !errors.Is(err, ErrIdentityInUse) {
		t.Fatalf("Err = %v; want ErrIdentityInUse", err)
	}
	h.advance(testLease)
	r := h.c.Ready(h.now)
	if len(r.Confirm) != 1 || r.Confirm[0] != (LeaseRef{Identity: "a", Version: prev.Version}) {
		t.Fatalf("Confirm = %v", r.Confirm)
	}
	h.c.Confirmed("a", prev.Version, true)
	r = h.ready()
	if r.TakeOver == nil || *r.TakeOver != (LeaseRef{Identity: "a", Version: prev.Version}) || len(r.GarbageCollect) != 0 ||
		r.Publish == nil || r.Publish.Incarnation != "inc-a" {
		t.Fatalf("after confirm: take over %v gc %v publish %+v; want the Record written over the judged version", r.TakeOver, r.GarbageCollect, r.Publish)
	}
	if r := h.c.Ready(h.now); r.TakeOver == nil {
		t.Fatal("TakeOver not repeated before the own write was observed")
	}
	r = h.sync()
	if r.TakeOver != nil || h.c.Err() != nil {
		t.Fatalf("own write observed: take over %v err %v", r.TakeOver, h.c.Err())
	}
	if got := h.settle(); !got.Equal(shard.FullPartitionSet(7)) {
		t.Fatalf("activated %v", got)
	}
}

// The Lease of an earlier, live incarnation that is deleted by hand while
// this one waits for it to expire leaves its claim in force for
// LeaseDuration: that process may still run it (it fences when it notices).
// This incarnation may create its Lease at once, but not activate what the
// earlier one claimed.
func TestPreviousIncarnationsLeaseDeletedKeepsItsClaim(t *testing.T) {
	h := newHarness(t, "a")
	h.c.CachesSynced()
	h.own = &Observed{Record: Record{Identity: "a", Incarnation: "old", State: StateActive,
		Claim: set(0, 1), Generation: 9, Fingerprint: testRing.Fingerprint()}, Version: h.version(), UID: "u1"}
	if r := h.sync(); r.Publish != nil {
		t.Fatal("wrote over a live Lease of another incarnation")
	}
	h.advance(time.Second)
	h.own = nil // kubectl delete lease
	activated := h.settle()
	if h.own == nil || h.own.Incarnation != "inc-a" {
		t.Fatalf("did not create its Lease once the earlier one was gone: %+v", h.own)
	}
	activated = activated.Union(h.pass(testLease - time.Second).Activate)
	if activated.Has(0) || activated.Has(1) {
		t.Fatalf("activated %v within LeaseDuration of the earlier incarnation's Lease vanishing with {0,1} claimed", activated)
	}
	if !activated.Equal(set(2, 3, 4, 5, 6)) {
		t.Fatalf("activated %v; want the partitions the earlier incarnation did not claim", activated)
	}
	if got := h.pass(time.Second).Activate.Union(h.settle()); !got.Equal(set(0, 1)) {
		t.Fatalf("LeaseDuration after the earlier Lease vanished: activated %v; want {0,1}", got)
	}
}

// Once this incarnation has seen its own Lease, another incarnation writing
// it is a live duplicate: stop everything, write nothing more.
func TestDuplicateIdentityStops(t *testing.T) {
	h := activeAlone(t, "a")
	h.own = &Observed{Record: Record{Identity: "a", Incarnation: "intruder", State: StateJoining,
		Claim: set(), Generation: 1, Fingerprint: testRing.Fingerprint()}, Version: h.version()}
	h.c.Observe(h.now, h.snapshot(nil))
	r := h.c.Ready(h.now)
	if !r.Fence || !r.Revoke.Equal(shard.FullPartitionSet(7)) || r.Publish != nil || !h.c.Done() {
		t.Fatalf("duplicate: %+v done %v", r, h.c.Done())
	}
	if err := h.c.Err(); !errors.Is(err, ErrDuplicateIdentity) {
		t.Fatalf("Err = %v", err)
	}
}

func TestExpiredLeasesAreGarbageCollectedOnce(t *testing.T) {
	h := activeAlone(t, "a")
	b := h.setPeer("b", StateActive)
	h.sync()
	h.c.Drained(shard.FullPartitionSet(7))
	collected := 0
	for range 12 {
		h.renewFor(testLease)
		r := h.c.Ready(h.now)
		for _, ref := range r.GarbageCollect {
			if ref != (LeaseRef{Identity: "b", Version: b.Version}) {
				t.Fatalf("collected %v", ref)
			}
			collected++
		}
	}
	if collected != 1 {
		t.Fatalf("b collected %d times; want once", collected)
	}
}

func TestNextDeadline(t *testing.T) {
	h := activeAlone(t, "a")
	h.setPeer("b", StateJoining)
	h.sync()
	renewed := h.now
	next, ok := h.c.NextDeadline()
	if !ok || !next.Equal(renewed.Add(testDeadline)) {
		t.Fatalf("NextDeadline = %v, %v; want the renew deadline %v", next, ok, renewed.Add(testDeadline))
	}
	h.advance(5 * time.Second)
	h.c.RenewSucceeded(h.now)
	h.c.Ready(h.now)
	// b's expiry (renewed+10s) now comes before the renew deadline (renewed+11s).
	if next, _ = h.c.NextDeadline(); !next.Equal(renewed.Add(testLease)) {
		t.Fatalf("NextDeadline = %v; want b's expiry %v", next, renewed.Add(testLease))
	}
}

// A renew reported with a send time in the future counts as sent at the
// next step's time, never later.
func TestRenewFromTheFutureIsClamped(t *testing.T) {
	h := activeAlone(t, "a")
	h.c.RenewSucceeded(h.now.Add(time.Hour))
	h.c.Ready(h.now)
	h.advance(testDeadline)
	if r := h.c.Ready(h.now); !r.Fence {
		t.Fatal("a send time in the future postponed the fence")
	}
}

func TestObserveToleratesGarbage(t *testing.T) {
	h := newHarness(t, "a")
	h.c.CachesSynced()
	h.c.Observe(h.now, []Observed{
		{},                              // no identity
		{Record: Record{Identity: "b"}}, // zero claim, no version
		{Record: Record{Identity: "b", Claim: set(1)}, Version: "1"}, // duplicate name
		{Record: Record{Identity: "c", Claim: shard.NewPartitionSet(3, 1)}, Version: "2"},
	})
	r := h.c.Ready(h.now)
	// The nameless Lease is ignored, the first of two Leases named b kept.
	if peers := h.c.peers.byID; len(peers) != 2 || peers["b"] == nil || peers["b"].obs.Version != "" || peers["c"] == nil {
		t.Fatalf("peers after garbage: %v", h.c.peers.ids)
	}
	// b's claim of no size claims nothing; c's claim over 3 partitions
	// cannot be read here and so blocks every partition.
	if b := h.c.blockers(); !b.claimed.IsEmpty() || !b.all {
		t.Fatalf("peer claims %v blockAll %v; want none, true", b.claimed, b.all)
	}
	if r.Publish == nil || r.Publish.State != StateJoining || !r.Publish.Claim.IsEmpty() || len(h.c.View()) != 0 {
		t.Fatalf("first step: publish %+v view %v; want joining with nothing claimed, empty view", r.Publish, h.c.View())
	}
	h.c.Drained(shard.NewPartitionSet(100, 99))
	if !h.c.Draining().IsEmpty() || h.c.Draining().Size() != 7 {
		t.Fatalf("Drained of a foreign-size set changed draining to %v", h.c.Draining())
	}
	h.c.Confirmed("nobody", "1", true)
	h.c.ConfirmFailed("nobody")
	if _, ok := h.c.peers.byID["nobody"]; ok {
		t.Fatal("a confirm of an unknown Lease created a peer")
	}
	h.c.Ready(h.now.Add(-time.Hour)) // time going back is ignored
	if !h.c.now.Equal(h.now) {
		t.Fatalf("core time went back to %v", h.c.now)
	}
}

// TestDepartedObjectsOfOneNameAllKeepTheirClaims: a watch that lagged across
// two departures of one name (the Lease of b, claimed by incarnation b2, is
// deleted by hand; an older incarnation b1 recreates it and deletes it
// again; maybe it is created once more) learns of each object only from its
// departure, which the shell reports per UID. The claim of the first object
// was never seen in the view, and the later objects show nothing in force:
// it must still count, as a ghost, for LeaseDuration.
func TestDepartedObjectsOfOneNameAllKeepTheirClaims(t *testing.T) {
	for _, recreated := range []bool{false, true} {
		t.Run(map[bool]string{false: "gone", true: "recreated"}[recreated], func(t *testing.T) {
			h := newHarness(t, "a") // caches not synced: a stays joining for now
			b := func(inc string, state State, uid string, gone bool, claim ...int) Observed {
				return Observed{Record: Record{Identity: "b", Incarnation: inc, State: state, Claim: set(claim...),
					Generation: 1, Fingerprint: testRing.Fingerprint()}, Version: h.version(), UID: uid, Gone: gone}
			}
			observe := func(bs ...Observed) shard.PartitionSet {
				activated := set()
				for range 10 {
					h.c.Observe(h.now, append(h.snapshot(nil), bs...))
					r := h.ready()
					activated = activated.Union(r.Activate)
					if r.Publish == nil {
						break
					}
				}
				return activated
			}
			observe(b("inc-b1", StateJoining, "u1", false)) // all a ever saw of b in the view

			// As the shell reports them: the view, then the departures of
			// each name in the order they left.
			var lagged []Observed
			if recreated {
				// Leaving, not joining: a fresh joiner would be awaited
				// (TestJoiningPeersAreAwaitedAtFormation), which is not
				// what this test is about.
				lagged = append(lagged, b("inc-b1", StateLeaving, "u3", false))
			}
			lagged = append(lagged,
				b("inc-b2", StateActive, "u1", true, 0, 1), // taken over by b2, which claimed {0,1}; deleted by hand
				b("inc-b1", StateLeaving, "u2", true),      // b1 recreated it, left and deleted it
			)
			h.c.CachesSynced()
			got := observe(lagged...)
			if got.Has(0) || got.Has(1) || !h.c.Blocked().Equal(set(0, 1)) {
				t.Fatalf("activated %v, blocked %v; want {0,1} blocked by the first object's departed claim", got, h.c.Blocked())
			}
			if !got.Equal(set(2, 3, 4, 5, 6)) {
				t.Fatalf("activated %v; want the partitions nobody claims", got)
			}

			// The claim is a ghost: the object is gone for good (a later one
			// of the name exists or existed), so it expires by observed time
			// alone, although the shell keeps reporting the departure.
			h.renewFor(testLease)
			if got := observe(lagged...); !got.Equal(set(0, 1)) {
				t.Fatalf("a LeaseDuration after the departures: activated %v; want {0,1}", got)
			}
			if got := observe(lagged...); !got.IsEmpty() || !h.c.Active().Equal(shard.FullPartitionSet(7)) {
				t.Fatalf("reported again: activated %v, active %v; the expired ghost must not come back", got, h.c.Active())
			}
		})
	}
}

// What a write of the own Lease means is the core's decision: only a
// success answered within the client timeout counts as a renewal; a
// conflict asks for a read, never a blind retry; a deleted Lease is
// created afresh; RBAC refusal is fatal; anything else is retried.
func TestJudgeWrite(t *testing.T) {
	const timeout = 3 * time.Second
	sent := time.Unix(1000, 0)
	for _, tc := range []struct {
		name     string
		status   WriteStatus
		answered time.Duration
		want     WriteVerdict
	}{
		{"ok in time", WriteOK, time.Second, WriteVerdict{Landed: true, Renewed: true}},
		{"ok at the timeout", WriteOK, timeout, WriteVerdict{Landed: true, Renewed: true}},
		{"ok too late", WriteOK, timeout + time.Millisecond, WriteVerdict{Landed: true}},
		{"conflict", WriteConflict, time.Millisecond, WriteVerdict{ReadOwn: true}},
		{"exists", WriteExists, time.Millisecond, WriteVerdict{ReadOwn: true}},
		{"gone", WriteGone, time.Millisecond, WriteVerdict{Recreate: true}},
		{"forbidden", WriteForbidden, time.Millisecond, WriteVerdict{Fatal: true}},
		{"timeout", WriteTimeout, timeout, WriteVerdict{Retry: true}},
		{"failed", WriteFailed, time.Millisecond, WriteVerdict{Retry: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := JudgeWrite(timeout, WriteResult{Status: tc.status, SentAt: sent, AnsweredAt: sent.Add(tc.answered)})
			if got != tc.want {
				t.Fatalf("JudgeWrite = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// After a conflict, the own Lease as read is written over only when this
// incarnation wrote it or the core named that exact version in TakeOver.
func TestJudgeOwnRead(t *testing.T) {
	for _, tc := range []struct {
		name     string
		takeOver string
		read     OwnRead
		want     OwnReadVerdict
	}{
		{"gone", "", OwnRead{}, OwnCreate},
		{"own write that landed", "", OwnRead{Found: true, Incarnation: "me", Version: "7"}, OwnAdopt},
		{"another incarnation", "", OwnRead{Found: true, Incarnation: "other", Version: "7"}, OwnNotOurs},
		{"another incarnation, taken over", "7", OwnRead{Found: true, Incarnation: "other", Version: "7"}, OwnAdopt},
		{"another incarnation, a later version than taken over", "7", OwnRead{Found: true, Incarnation: "other", Version: "8"}, OwnNotOurs},
		{"damaged, no incarnation", "", OwnRead{Found: true, Version: "9"}, OwnNotOurs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := JudgeOwnRead("me", tc.takeOver, tc.read); got != tc.want {
				t.Fatalf("JudgeOwnRead = %v, want %v", got, tc.want)
			}
		})
	}
	if got := JudgeOwnRead("", "", OwnRead{Found: true}); got != OwnNotOurs {
		t.Errorf("an empty incarnation adopts a Lease without one (%v): no process writes one", got)
	}
}

// Two processes of one identity (a replacement whose predecessor still
// runs): the new one waits while the old one's Lease is live. When a third
// party deletes that Lease, the old process may still run its claims until
// it sees the loss and fences; the new one takes the identity at once but
// must not activate those claims for LeaseDuration (the real coordinator's
// simulation found the gap: seeds 1066390 and 1070631). Whether the new
// process saw the old claim in the view or only in the deletion event, it
// counts.
func TestPriorIncarnationsClaimOutlivesItsLease(t *testing.T) {
	for _, seenInView := range []bool{true, false} {
		t.Run("seen in view "+strconv.FormatBool(seenInView), func(t *testing.T) {
			h := newHarness(t, "a")
			h.c.CachesSynced()
			old := Observed{Record: Record{Identity: "a", Incarnation: "old", State: StateActive,
				Claim: set(0, 1, 2, 3, 4, 5, 6), Generation: 4, Fingerprint: testRing.Fingerprint()}, Version: h.version(), UID: "u1"}
			if seenInView {
				h.c.Observe(h.now, []Observed{old})
				if r := h.ready(); r.Publish != nil {
					t.Fatalf("published %v while another live incarnation holds the Lease", r.Publish)
				}
			} else {
				h.c.Observe(h.now, nil)
				h.ready()
			}
			h.advance(time.Second)
			gone := old
			gone.Gone, gone.Version = true, h.version()
			h.c.Observe(h.now, []Observed{gone})
			activated := h.settle()
			activated = activated.Union(h.pass(testLease - 2*time.Second).Activate)
			if !activated.IsEmpty() {
				t.Fatalf("activated %v within LeaseDuration of the old incarnation's Lease vanishing", activated)
			}
			if got := h.c.Blocked(); !got.Equal(set(0, 1, 2, 3, 4, 5, 6)) {
				t.Errorf("blocked %v; want the old incarnation's claim", got)
			}
			activated = h.pass(3 * time.Second).Activate.Union(h.settle())
			if !activated.Equal(set(0, 1, 2, 3, 4, 5, 6)) {
				t.Fatalf("after LeaseDuration, activated %v; want everything", activated)
			}
		})
	}
}

// The previous incarnation's Lease, collected by a peer (its claim emptied
// in the write before the delete), leaves with that empty claim: nothing of
// the older claim stays in force, while a departure in a state that still
// claims keeps that claim for LeaseDuration.
func TestPriorIncarnationsCollectedLeaseReleasesItsClaim(t *testing.T) {
	for _, emptied := range []bool{true, false} {
		t.Run("emptied "+strconv.FormatBool(emptied), func(t *testing.T) {
			h := newHarness(t, "a")
			h.c.CachesSynced()
			old := Observed{Record: Record{Identity: "a", Incarnation: "old", State: StateActive,
				Claim: set(0, 1, 2), Generation: 4, Fingerprint: testRing.Fingerprint()}, Version: h.version(), UID: "u1"}
			h.c.Observe(h.now, []Observed{old})
			h.ready()
			h.advance(time.Second)
			gone := old
			gone.Gone, gone.Version = true, h.version()
			if emptied {
				gone.State, gone.Claim = StateLeaving, set()
			}
			h.c.Observe(h.now, []Observed{gone})
			activated := h.settle().Union(h.pass(2 * time.Second).Activate).Union(h.settle())
			if want := emptied; activated.Has(1) != want {
				t.Fatalf("departed with its claim emptied %v: activated %v within 2s; want partition 1 active %v", emptied, activated, want)
			}
		})
	}
}

// A watch that shows an older state of a peer's Lease after a newer one
// (reordered events, a relist from a lagging API server) must not make the
// claims added since look released: the core keeps the newest Record of
// that writer it has seen (Generations order one incarnation's Records).
// Built as the mutant without that defence (-tags mutant_trustwatchorder,
// make unit), the test shows the stale views free the claims instead.
func TestStaleViewOfPeerKeepsNewestClaim(t *testing.T) {
	for _, trust := range []bool{trustWatchOrder} {
		h := newHarness(t, "a")
		peer := func(gen uint64, claim ...int) *Observed {
			return &Observed{Record: Record{Identity: "b", Incarnation: "b#1", State: StateJoining,
				Claim: set(claim...), Generation: gen, Fingerprint: testRing.Fingerprint()}, Version: h.version(), UID: "u1"}
		}
		// b claims {0} at generation 2 and {0,1} at generation 3. Only
		// then may a join and activate what b leaves free.
		h.peer["b"] = peer(2, 0)
		h.settle()
		h.peer["b"] = peer(3, 0, 1)
		h.settle()
		h.c.CachesSynced()
		if got := h.settle(); got.Has(0) || got.Has(1) {
			t.Fatalf("activated %v while b claims {0,1}", got)
		}
		// Stale: b at generation 2, then at 1, before it claimed anything.
		activated := shard.NewPartitionSet(testRing.Partitions)
		for _, o := range []*Observed{peer(2, 0), peer(1)} {
			h.peer["b"] = o
			activated = activated.Union(h.settle())
			if trust {
				continue
			}
			if activated.Has(0) || activated.Has(1) {
				t.Fatalf("activated %v on a stale view of b (generation %d), whose newest state claims {0,1}", activated, o.Generation)
			}
			if !h.c.Blocked().Has(0) || !h.c.Blocked().Has(1) {
				t.Fatalf("blocked %v; want {0,1} blocked by b's newest claim", h.c.Blocked())
			}
		}
		if trust {
			if !activated.Has(0) || !activated.Has(1) {
				t.Fatalf("with the defence off, the stale views should free {0,1} (activated %v): the test shows nothing", activated)
			}
			continue
		}
		// The stale states still count as changes: b is live.
		h.pass(testLease - time.Second)
		if r := h.ready(); len(r.Confirm) != 0 {
			t.Fatalf("b confirmed expired although its Lease changed within LeaseDuration: %v", r.Confirm)
		}
		// b's next write (generation 4, claim {0}) is newer: 1 is free.
		h.peer["b"] = peer(4, 0)
		if got := h.settle(); !got.Has(1) || got.Has(0) {
			t.Fatalf("after b's newer Record claiming {0}: activated %v, want 1 and not 0", got)
		}
	}
}

// Replicas started together: one that turns active while a peer of its
// configuration is still in its join wait (joining, claiming nothing)
// claims nothing until that peer joins, then only its own share, instead of
// every partition for a moment. A peer still joining after LeaseDuration is
// not waited for, and a replica that already holds partitions never waits.
func TestJoiningPeersAreAwaitedAtFormation(t *testing.T) {
	h := newHarness(t, "a")
	h.c.CachesSynced()
	h.setPeer("b", StateJoining)
	if got := h.settle(); !got.IsEmpty() || !h.c.Target().IsEmpty() {
		t.Fatalf("with b joining: activated %v, target %v; want nothing yet", got, h.c.Target())
	}
	if next, ok := h.c.NextDeadline(); !ok || next.After(h.now.Add(testLease*3/2)) {
		t.Fatalf("next deadline %v (%v); want one within 1.5×LeaseDuration, when b stops being awaited", next, ok)
	}
	h.setPeer("b", StateActive)
	got := h.settle()
	if got.IsEmpty() || got.Len() == testRing.Partitions {
		t.Fatalf("after b joined: a activated %v; want its share only", got)
	}

	// A peer stuck joining is waited for 1.5×LeaseDuration only. b was
	// first seen with a, as replicas started together are: a's own join
	// wait ends at LeaseDuration and b's a little later, so a must still be
	// waiting then.
	h2 := newHarness(t, "a")
	h2.c.CachesSynced()
	h2.setPeer("b", StateJoining)
	h2.settle()
	for _, d := range []time.Duration{testLease + time.Millisecond, testLease/2 - 2*time.Millisecond} {
		h2.renewFor(d)
		h2.peer["b"].Version = h2.version() // b renews, still joining
		if got := h2.settle(); !got.IsEmpty() {
			t.Fatalf("b joining for less than 1.5×LeaseDuration: activated %v", got)
		}
	}
	h2.renewFor(2 * time.Millisecond)
	h2.peer["b"].Version = h2.version()
	if got := h2.settle(); got.Len() != testRing.Partitions {
		t.Fatalf("b joining for 1.5×LeaseDuration: activated %v; want every partition", got)
	}

	// Holding partitions, a replica does not wait for a new joiner.
	h3 := activeAlone(t, "a")
	h3.setPeer("c", StateJoining)
	h3.settle()
	if got := h3.c.Target(); got.Len() != testRing.Partitions {
		t.Fatalf("a new joiner made an active replica drop its target to %v", got)
	}
}
