package handoff

import (
	"fmt"
	"slices"
	"time"

	"github.com/kshard/kshard/internal/assign"

	"github.com/kshard/kshard/internal/handoffhook"
	"github.com/kshard/kshard/shard"
)

// Core is the handoff decision core of one replica. It is not safe for
// concurrent use: the shell serialises its inputs.
//
// Core orchestrates; the rules live in types of their own, each with its
// tests: joinWait (join.go) how long the replica has watched the ring,
// ownLease (own.go) its own identity's Lease, peerView (peers.go) every
// other Lease with its tombstones and ghosts (ghosts.go), proofs
// (proof.go) the kubelet's reports of ended processes, fencing (fence.go)
// renewals and the fence, claimLedger and blockers (ledger.go) the own
// claim with its read-your-write generations and the claims that block
// it, placement and weightReport (placement.go) the ring and a balanced
// ring's weights, handover (handover.go) make before break, and unacked
// (ready.go) what the shell has not acknowledged. A dozen small functions
// that carry one rule each live in files of their own (drain.go,
// readback.go, tombstone.go, …), each beside a mutant built only with its
// tag (drain_mutant.go: -tags mutant_skipdrain, …) that breaks that rule,
// for the simulation's mutation test (mutants_test.go).
type Core struct {
	cfg         Config
	partitions  int
	fingerprint string

	// now is the latest local time the shell passed in; it never goes back.
	now time.Time

	// What the core knows of the ring's Leases.
	join    joinWait
	own     ownLease
	peers   peerView
	deaths  proofs // incarnations the kubelet reported ended, by pod UID
	foreign *peer  // a live active peer with another fingerprint, if any

	// Renewals of the own Lease and the fence, and the validity they
	// give the replica's work.
	fencing  fencing
	validity validityState

	// Lifecycle: inputs and where the replica stands.
	state        State
	cachesSynced bool
	leaving      bool
	// returning: the Record keeps this replica's place in the ring for
	// its identity's next incarnation (Record.Returning; updateReturning).
	returning bool
	done      bool
	err       error // what Err reports (explain)

	// The Record this replica publishes: besides the state, the claim and
	// its generations, the own pod (proof.go), the partitions its cache
	// holds (warm) and a balanced ring's weights.
	ledger  claimLedger
	pod     string // UID of the own pod; "" unknown
	warm    shard.PartitionSet
	weights weightReport

	// Partitions: the ring this replica places them by, its share of it
	// (target), those it may reconcile (active), those revoked and not yet
	// drained, and those it targets but may not activate yet (blocked by
	// another claim, or, with Config.PartitionCache, waiting for the cache
	// that reports cacheSynced).
	placement    placement
	target       shard.PartitionSet
	active       shard.PartitionSet
	draining     shard.PartitionSet
	blocked      shard.PartitionSet
	cacheSynced  shard.PartitionSet
	cacheWaiting shard.PartitionSet
	handover     handover

	// What Ready asked for and Advance has not acknowledged yet.
	unacked unacked
}

// New returns a Core for cfg, in state joining, with nothing claimed.
//
// hooks are for kshard's own simulations (internal/handoffhook): a program
// outside kshard cannot name their type, so it passes none, and nil ones
// are ignored.
func New(cfg Config, hooks ...*handoffhook.Hooks) (*Core, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	p := cfg.Ring.Partitions
	fingerprint := cfg.Ring.Fingerprint()
	empty := shard.NewPartitionSet(p)
	c := &Core{
		cfg:         cfg,
		partitions:  p,
		fingerprint: fingerprint,

		join:   joinWait{lease: cfg.LeaseDuration},
		own:    newOwnLease(cfg, fingerprint),
		peers:  newPeerView(cfg, fingerprint),
		deaths: proofs{},

		fencing: newFencing(cfg),
		state:   StateJoining,

		ledger:  newClaimLedger(p),
		warm:    empty.Clone(),
		weights: newWeightReport(p),

		placement:    newPlacement(cfg.Ring),
		target:       empty.Clone(),
		active:       empty.Clone(),
		draining:     empty.Clone(),
		blocked:      empty.Clone(),
		cacheSynced:  empty.Clone(),
		cacheWaiting: empty.Clone(),
		handover:     newHandover(cfg.HandoverTimeout, p),

		unacked: newUnacked(p),
	}
	for _, h := range hooks {
		if h != nil {
			c.attach(h)
		}
	}
	return c, nil
}

// Inputs. Each records what the shell observed or carried out; decisions
// wait for the next Ready. (Terminated and SetPod are in proof.go.)

// Observe feeds the informer's current content: every Lease of the ring,
// the own one included; Leases that were deleted are absent, or reported
// Gone in the state that left the view: one per Lease object (UID), those
// of one identity in the order they left, the last one last. The first
// call must come after the informer has synced. now is the local time of
// the observation: a Lease whose Version differs from the previous call's
// counts as changed at now.
func (c *Core) Observe(now time.Time, leases []Observed) {
	c.advance(now)
	c.join.observe(c.now, leases)
	c.peers.observe(c.now, leases)
	c.own.observe(c.now, c.peers.observation, leases)
}

// JoinScanClean reports that the shell, after the informer's first list,
// listed every Lease of the namespace without the ring's label selector and
// found none that carries the member finalizer without belonging to the
// ring (a member's Lease relabelled out of it by hand), and that the
// informer holds every ring Lease that list showed. With every Lease of the
// first view finalized, the replica joins without the join wait.
func (c *Core) JoinScanClean() { c.join.scanClean = true }

// CachesSynced reports that the controllers' caches have synced: the replica
// may become a ring member.
func (c *Core) CachesSynced() { c.cachesSynced = true }

// PartitionsSynced reports the partitions whose objects the cache has
// listed and is watching now (Config.PartitionCache): it replaces the
// previous report. A partition leaves it only when the cache stops holding
// it; an active partition that leaves it stays active (its informer relists
// and delivers every object again).
func (c *Core) PartitionsSynced(set shard.PartitionSet) {
	c.cacheSynced = shard.NewPartitionSet(c.partitions).Union(set)
}

// ObjectsCounted reports, for a balanced ring (shard.Config.Balance), how
// many objects the cache holds in each partition (counts, indexed by
// partition) and the partitions it had synced before counting (synced): the
// counts of those are complete. It replaces the previous report; the core
// publishes the synced partitions' counts, quantized, in the Record
// (Record.Weights). Without Balance it is ignored.
func (c *Core) ObjectsCounted(synced shard.PartitionSet, counts []int) {
	if !c.balanced() {
		return
	}
	c.weights.counted(synced, counts)
}

// RenewSucceeded reports that a write of the own Lease sent at local time
// sentAt has succeeded. Only the sending time counts: the write may have
// waited in the network, but it cannot have landed before it was sent.
func (c *Core) RenewSucceeded(sentAt time.Time) { c.fencing.succeeded(sentAt) }

// Drained reports that none of set is in flight any more.
// A set over another partition count is a shell bug and is ignored: it
// names no partition of this ring.
func (c *Core) Drained(set shard.PartitionSet) {
	if set.Size() != c.partitions {
		return
	}
	c.draining = c.draining.Difference(set)
}

// Confirmed reports a direct read of identity's Lease asked for by Confirm:
// found is false when it does not exist, current is its resourceVersion.
func (c *Core) Confirmed(identity, current string, found bool) {
	if identity != c.cfg.Identity {
		c.peers.confirmed(c.now, identity, current, found)
		return
	}
	c.own.confirmed(c.now, current, found)
}

// ConfirmFailed reports that the direct read of identity's Lease failed; the
// core asks again in its next step.
func (c *Core) ConfirmFailed(identity string) {
	if identity != c.cfg.Identity {
		c.peers.confirmFailed(identity)
		return
	}
	c.own.confirmFailed()
}

// Leave starts a graceful leave (SIGTERM): revoke everything, publish an
// empty claim once drained, then delete the own Lease, or, with
// Config.KeepPlaceOnLeave, leave it to the identity's next incarnation.
func (c *Core) Leave() { c.leaving = true }

// The step: Ready decides, Advance acknowledges.

// Ready runs one decision step at local time now and returns what the shell
// must do. Call it after every input, and again at NextDeadline; call Advance
// with what was carried out. Whatever was not acknowledged is asked for again
// by the next Ready (a Publish as the latest Record), so applying a Ready
// twice must be harmless: Activate and Revoke of a set already applied, and
// Fence when already fenced, change nothing.
func (c *Core) Ready(now time.Time) Ready {
	r := c.step(now)
	c.validity = nextValidity(c.validity, c.fencing.lastSent, c.fencing.fenced || c.done, c.cfg.RenewDeadline)
	c.unacked.merge(&r, c.active, c.draining, c.awaitingConfirm)
	return r
}

// Advance acknowledges that the shell carried out rd, or the part of it
// given: pass a Ready with only what succeeded (say, the partitions whose
// activation worked) and the rest is asked for again.
func (c *Core) Advance(rd Ready) {
	if rd.Publish != nil {
		c.ledger.acked(rd.Publish.Generation)
	}
	c.unacked.ack(rd)
}

// step decides, in this order:
//  1. a duplicate identity stops the core for good;
//  2. renewal: lift a fence, fence, or exit when what ran at a fence
//     outlived the stop deadline (checkRenewal);
//  3. judge the Leases: proofs of death, confirms of expired Leases,
//     collection, taking over the previous incarnation's Lease, a foreign
//     member (judgeLeases);
//  4. the lifecycle: joining → active → leaving (updateState);
//  5. converge: the ring and the target, revoke what left it (make before
//     break), claim (drain before release), activate what is claimed, read
//     back and free (claim before act) and synced (synced before act);
//  6. close the Record's changes under a new generation (commit);
//  7. finish a graceful leave, publish the Record, let a deletion of the
//     own Lease complete (finalize), and say what keeps the replica from
//     working normally (explain).
func (c *Core) step(now time.Time) Ready {
	c.advance(now)
	r := Ready{Activate: shard.NewPartitionSet(c.partitions), Revoke: shard.NewPartitionSet(c.partitions)}
	if c.done {
		return r
	}
	if c.own.duplicate != "" {
		c.stop(&r)
		c.err = fmt.Errorf("handoff: %w: Lease of %s now carries incarnation %s, this process is %s; it has stopped",
			ErrDuplicateIdentity, c.cfg.Identity, c.own.duplicate, c.cfg.Incarnation)
		return r
	}
	if c.checkRenewal(&r); c.done {
		return r
	}
	c.judgeLeases(&r)
	c.updateState()
	c.updateReturning()
	c.converge(&r)
	c.ledger.commit(c.leaving)
	c.finishLeave(&r)
	c.publish(&r)
	c.finalize(&r)
	c.explain()
	return r
}

// advance moves the core's time to now, never back.
func (c *Core) advance(now time.Time) {
	if now.After(c.now) {
		c.now = now
	}
	c.fencing.clamp(c.now)
}

// stop ends the core for good: everything is revoked at once, partitions
// already draining included (see fence).
func (c *Core) stop(r *Ready) {
	r.Fence = true
	c.draining = c.draining.Union(c.active)
	r.Revoke = c.draining.Clone()
	c.active = shard.NewPartitionSet(c.partitions)
	c.done = true
}

// Step 2: renewal and the fence.

// checkRenewal lifts the fence once renews count again, fences the replica
// when its renew deadline has passed or its own Lease is lost, and asks the
// process to exit when what was running at a fence outlives the stop
// deadline.
func (c *Core) checkRenewal(r *Ready) {
	c.fencing.lift(c.now, c.own.lost, c.own.lostAt)
	if c.fencing.due(c.now, c.own.lost) {
		c.fence(r)
	}
	if c.fencing.overdue(c.now, c.draining) {
		r.Exit = true
		c.done = true
	}
}

// fence drops everything at once and starts a new epoch: Records written
// before the fence may have been voided by peers, so none of them may serve
// as read-your-write again. Partitions already draining are revoked again:
// their reconciles must stop now too, without the rest of their grace
// period.
func (c *Core) fence(r *Ready) {
	r.Fence = true
	c.draining = c.draining.Union(c.active)
	r.Revoke = r.Revoke.Union(c.draining)
	c.active = shard.NewPartitionSet(c.partitions)
	c.fencing.start(c.now, c.draining)
	if c.state == StateActive {
		c.state = StateJoining
	}
	c.ledger.newEpoch()
}

// renewedRecently reports whether the own Lease is known to have been
// renewed within RenewDeadline, the precondition for reconciling anything.
func (c *Core) renewedRecently() bool { return c.fencing.recent(c.now) }

// Step 3: judge the Leases.

// judgeLeases voids the Leases of processes proven dead and names those
// worth a look at their pods, asks to confirm Leases that look expired and
// hold claims and to garbage-collect Leases expired for long, takes the
// previous incarnation's Lease over once it is void, and notes a live
// member of another ring configuration.
func (c *Core) judgeLeases(r *Ready) {
	c.judgeProofs(r)
	c.peers.judge(c.now, c.own.held, r)
	c.own.judge(c.now, c.peers.observation, r)
	c.foreign = c.peers.foreignActive(c.now)
}

// awaitingConfirm reports whether the Lease ref names still waits for the
// answer to a Confirm of that version: a confirm stays asked for until
// then.
func (c *Core) awaitingConfirm(ref LeaseRef) bool {
	p := c.peers.byID[ref.Identity]
	if ref.Identity == c.cfg.Identity {
		p = c.own.prior
	}
	return p != nil && p.confirming && p.obs.Version == ref.Version
}

// Step 4: the lifecycle.

// updateState moves joining → active → leaving. A replica becomes active
// once its caches synced, it holds its own Lease, renews in time, no
// member of another ring configuration is active, and it has watched the
// ring long enough (joinWait).
func (c *Core) updateState() {
	switch {
	case c.leaving:
		if c.state != StateLeaving {
			// A member keeps its place (a replica not yet a member has
			// none to keep, unless it is an incarnation returning to
			// one): in the same Record as the state, so that peers never
			// see it leave the ring.
			c.returning = c.returning || c.cfg.KeepPlaceOnLeave && c.state == StateActive
			c.state = StateLeaving
			c.ledger.changed()
		}
	case c.state == StateJoining && c.cachesSynced && c.own.held && !c.fencing.fenced && c.renewedRecently() && c.foreign == nil &&
		c.join.over(c.now):
		c.state = StateActive
		c.ledger.changed()
	}
}

// updateReturning decides whether the Record keeps this replica's place
// in the ring (Record.Returning): from the start of a graceful leave of an
// active replica with Config.KeepPlaceOnLeave, already a member, to its
// end; and for an incarnation that took over the Lease its predecessor left
// for it, while it joins, for at most LeaseDuration from the takeover, so
// that one that cannot become active (its caches never sync, say) gives its
// partitions up to its peers. Becoming active, or being fenced, ends it.
func (c *Core) updateReturning() {
	returning := c.returning
	switch {
	case c.leaving:
		// Decided when the leave started (updateState).
	case c.state == StateActive || c.fencing.fenced:
		returning = false
	default:
		returning = c.returnPending()
	}
	if returning != c.returning {
		c.returning = returning
		c.ledger.changed()
	}
}

// returnPending reports whether this joining incarnation still keeps the
// place its predecessor left for it.
func (c *Core) returnPending() bool {
	at := c.own.returnedAt
	return !at.IsZero() && c.now.Before(at.Add(c.cfg.LeaseDuration))
}

// Step 5: converge.

// converge recomputes view and target, revokes what is no longer targeted,
// updates the claim, and activates claimed partitions that are free.
func (c *Core) converge(r *Ready) {
	c.updateRing()
	own := c.own.current
	self := c.state == StateActive && !c.fencing.fenced && own != nil && own.State == StateActive && own.Fingerprint == c.fingerprint
	if ring := c.placement.ring; self && ring != nil && ring.Contains(c.cfg.Identity) && !c.awaitingJoiners() {
		c.target = ring.Partitions(c.cfg.Identity)
	} else {
		c.target = shard.NewPartitionSet(c.partitions)
	}

	// Make before break: a partition leaving the target stays active while
	// its new owner lists it (handover).
	if revoke := c.handover.revoke(c.now, c.active.Difference(c.target), c.placement.usable(), c.successorListing); !revoke.IsEmpty() {
		c.active = c.active.Difference(revoke)
		c.draining = c.draining.Union(revoke)
		r.Revoke = r.Revoke.Union(revoke)
	}

	// Drain before release: draining partitions stay claimed (claimOf).
	c.ledger.set(claimOf(c.target, c.active, c.draining))

	// Claim before act.
	block := c.blockers()
	candidates := c.target.Difference(c.active).Difference(c.draining)
	c.blocked = shard.NewPartitionSet(c.partitions)
	c.cacheWaiting = shard.NewPartitionSet(c.partitions)
	// checkRenewal has fenced already if the renew deadline passed; the
	// renew check stays so that no reordering of the step can lose it.
	mayActivate := c.state == StateActive && !c.fencing.fenced && c.renewedRecently() && own != nil
	for p := range candidates.All() {
		if block.blocks(p) {
			c.blocked.Add(p)
			continue
		}
		if !mayActivate || !c.ledger.readBack(p, own) {
			continue
		}
		// Synced before act: the replay at activation reads the cache,
		// which must hold every object of p by then.
		if c.cfg.PartitionCache && !c.cacheSynced.Has(p) {
			c.cacheWaiting.Add(p)
			continue
		}
		c.active.Add(p)
		r.Activate.Add(p)
	}
	if c.cfg.PartitionCache {
		r.Hold = c.ledger.claim.Clone()
		if warm := c.target.Intersect(c.cacheSynced); !warm.Equal(c.warm) {
			c.warm = warm
			c.ledger.changed()
		}
		c.updateWeights()
	}
}

// updateRing rebuilds the ring when the view changed. The view holds the
// live active Leases of this fingerprint; the own Lease counts as observed.
func (c *Core) updateRing() {
	own := c.own.current
	// A leaver keeping its place stays in its own ring too: the partitions
	// it revokes have no successor to wait for (handover).
	self := own != nil && own.State == StateActive && c.state == StateActive || c.leaving && c.returning
	view := c.peers.members(c.now, self)
	c.placement.place(view, c.gatherWeights())
}

// balanced reports whether the replica publishes and places by weights.
func (c *Core) balanced() bool { return c.cfg.PartitionCache && c.cfg.Ring.Balance > 0 }

// gatherWeights returns the weights that place a balanced ring: for each
// partition the largest weight published by a live Lease of this ring's
// fingerprint, this replica's own included (nil without Balance). Every
// holder of a partition counts the same objects, and under make before
// break its old and new owner both report it, so the largest report is
// the same on every replica that sees the same Leases and does not gap
// while a partition moves.
func (c *Core) gatherWeights() assign.Weights {
	if c.cfg.Ring.Balance <= 0 {
		return nil
	}
	return c.peers.maxWeights(c.now, assign.MaxWeights(nil, c.weights.published, c.partitions))
}

// updateWeights recomputes the weights this replica publishes
// (Record.Weights).
func (c *Core) updateWeights() {
	if c.balanced() && c.weights.update(c.cacheSynced, c.placement.viewWeights) {
		c.ledger.changed()
	}
}

// awaitingJoiners reports whether this replica, active but holding
// nothing yet, leaves every partition unclaimed a moment longer for peers
// about to join: live peers of its configuration, claiming nothing, first
// seen joining less than joinerPatience ago. Replicas started together (a new ring, a fleet
// restarted at once) finish their join waits moments apart; without this
// the first would claim every partition and hand most of them on at once,
// replaying them and, with a sharded cache, listing every object, only to
// drop them again. With it each claims its own share once the last has
// joined. A replica already holding partitions never waits (a scale-up
// moves partitions as before), and a peer still joining joinerPatience
// after it was first seen (blocked, say) is not waited for: a delay of at
// most joinerPatience, never a stall. Claims, and so safety, are unchanged.
func (c *Core) awaitingJoiners() bool {
	if !c.ledger.claim.IsEmpty() || !c.active.IsEmpty() || !c.draining.IsEmpty() {
		return false
	}
	return c.peers.awaitingJoiner(c.now)
}

// successorListing reports whether p's owner under the current ring is a
// live active peer that reports its cache (Record.Warm) without p yet. A
// new owner that does not report its cache (a full cache, an older
// kshard), or is not live and active, gets p at once.
func (c *Core) successorListing(p int) bool {
	id, ok := c.placement.ring.Owner(p)
	if !ok || id == c.cfg.Identity {
		return false
	}
	return c.peers.listing(c.now, id, p)
}

// blockers returns the claims in force of every other Lease: peers,
// tombstones, ghosts, and previous incarnations of the own identity.
func (c *Core) blockers() blockers {
	b := newBlockers(c.partitions, c.fingerprint)
	c.peers.block(c.now, c.deaths, &b)
	c.own.ghosts.block(c.now, c.cfg.LeaseDuration, c.deaths, &b)
	return b
}

// Step 7: leave, publish, finalize, explain.

// finishLeave deletes the own Lease once its empty claim has been observed.
func (c *Core) finishLeave(r *Ready) {
	if !c.leaving || !c.ledger.claim.IsEmpty() || !c.active.IsEmpty() || !c.draining.IsEmpty() {
		return
	}
	if !c.ledger.published {
		c.done = true // never wrote a Lease: nothing to release
		return
	}
	if !c.own.held {
		// Never saw its own Lease, so never became active: whatever it may
		// have written claims nothing. Another incarnation may hold the
		// Lease, so waiting to observe the own one could last forever.
		r.DeleteLease = true
		c.done = true
		return
	}
	if c.ledger.released(c.own.current) {
		// A Lease left for the next incarnation stays: live for
		// LeaseDuration after this last write, it keeps the place.
		r.DeleteLease = !c.returning
		c.done = true
	}
}

// publish hands the Record to the shell when it changed and the own Lease
// may be written: the informer has listed, and no other incarnation holds it.
func (c *Core) publish(r *Ready) {
	if c.done || !c.join.observed || c.own.inUse() {
		return
	}
	if !c.ledger.unpublished() {
		return
	}
	rec := c.record()
	r.Publish = &rec
	c.ledger.published = true
}

func (c *Core) record() Record {
	return Record{
		Identity:    c.cfg.Identity,
		Incarnation: c.cfg.Incarnation,
		State:       c.state,
		Claim:       c.ledger.claim.Clone(),
		Generation:  c.ledger.generation,
		Fingerprint: c.fingerprint,
		Pod:         c.pod,
		Warm:        c.publishedWarm(),
		Weights:     c.weights.published.Clone(),
		Returning:   c.returning,
	}
}

// publishedWarm is Record.Warm: empty of size 0 (not reported) without a
// partition cache.
func (c *Core) publishedWarm() shard.PartitionSet {
	if !c.cfg.PartitionCache {
		return shard.PartitionSet{}
	}
	return c.warm.Clone()
}

// finalize asks the shell to let the deletion of the own Lease complete once
// this replica has fenced, nothing it ran is in flight, and the Lease shows
// its empty claim: from then on the Lease's absence hides nothing from a
// replica that starts without seeing it, and peers that saw the empty claim
// keep no tombstone.
func (c *Core) finalize(r *Ready) {
	own := c.own.current
	if c.own.terminating == "" || !c.fencing.fenced || !c.active.IsEmpty() || !c.draining.IsEmpty() || c.done ||
		own == nil || !own.Claim.IsEmpty() {
		return
	}
	r.Finalize = &LeaseRef{Identity: c.cfg.Identity, Version: c.own.terminating}
}

// explain sets Err to the condition the shell should report.
func (c *Core) explain() {
	switch {
	case c.placement.err != nil:
		c.err = fmt.Errorf("handoff: %w from members %v: %w", ErrRing, c.placement.view, c.placement.err)
	case c.foreign != nil:
		c.err = fmt.Errorf("handoff: %w: %s runs %s, this replica runs %s; not joining while it is active. Give all replicas the same ring configuration",
			ErrForeignFingerprint, c.foreign.obs.Identity, c.foreign.obs.Fingerprint, c.fingerprint)
	case c.own.inUse():
		prior := c.own.prior
		c.err = fmt.Errorf("handoff: %w: incarnation %s wrote it %v ago; waiting for it to expire (LeaseDuration %v)",
			ErrIdentityInUse, prior.obs.Incarnation, c.now.Sub(prior.lastChange), c.cfg.LeaseDuration)
	default:
		c.err = nil
	}
}

// Queries.

// NextDeadline returns the earliest future local time at which Ready would
// decide differently without any new input: the renew deadline, the stop
// deadline, when peers, ghosts or the previous incarnation's Lease would
// look expired, due for collection or worth a look at their pods, when a
// joiner stops being awaited, a handover times out, or the join wait ends.
func (c *Core) NextDeadline() (time.Time, bool) {
	var next time.Time
	consider := func(t time.Time) {
		if t.After(c.now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if c.done {
		return next, false
	}
	c.fencing.nextDeadline(consider)
	c.peers.nextDeadline(c.now, consider)
	c.own.nextDeadline(consider)
	c.handover.nextDeadline(consider)
	c.peers.nextSuspects(c.suspectAfter(), consider)
	if c.state == StateJoining {
		c.join.nextDeadline(consider)
	}
	if c.returning && !c.leaving {
		consider(c.own.returnedAt.Add(c.cfg.LeaseDuration))
	}
	return next, !next.IsZero()
}

// CacheWaiting returns the targeted partitions, free of other claims, that
// wait only for the cache to sync them (Config.PartitionCache).
func (c *Core) CacheWaiting() shard.PartitionSet { return c.cacheWaiting.Clone() }

// State returns the replica's lifecycle state as it publishes it.
func (c *Core) State() State { return c.state }

// Generation returns the generation of the current Record.
func (c *Core) Generation() uint64 { return c.ledger.generation }

// View returns the ring members as of the last step, sorted.
func (c *Core) View() []string { return slices.Clone(c.placement.view) }

// ViewWeights returns the weights the ring is placed by (Record.Weights
// gathered from the view; nil without shard.Config.Balance).
func (c *Core) ViewWeights() assign.Weights { return c.placement.viewWeights.Clone() }

// Target returns the partitions this replica owns under its view.
func (c *Core) Target() shard.PartitionSet { return c.target.Clone() }

// Claim returns the partitions in the current Record.
func (c *Core) Claim() shard.PartitionSet { return c.ledger.claim.Clone() }

// Active returns the partitions this replica may reconcile.
func (c *Core) Active() shard.PartitionSet { return c.active.Clone() }

// Draining returns the revoked partitions not reported Drained yet.
func (c *Core) Draining() shard.PartitionSet { return c.draining.Clone() }

// HandingOver returns the active partitions out of the target kept active
// until their new owner's cache holds them (Config.HandoverTimeout).
func (c *Core) HandingOver() shard.PartitionSet { return c.handover.pending.Clone() }

// Blocked returns the targeted partitions that another live Lease still
// claims.
func (c *Core) Blocked() shard.PartitionSet { return c.blocked.Clone() }

// Validity returns the lease validity as of the last step: what the shell
// publishes for workers and the client transport to check.
func (c *Core) Validity() Validity { return c.validity.Validity }

// Fenced reports whether the replica is fenced: its renew deadline passed
// and no renew has succeeded since.
func (c *Core) Fenced() bool { return c.fencing.fenced }

// OwnLeaseLost reports whether the own Lease, once held, is gone from the
// view or damaged, and not yet observed whole again: the replica is fenced
// for that reason until then.
func (c *Core) OwnLeaseLost() bool { return c.own.lost }

// Returning reports whether the Record keeps this replica's place in the
// ring for its identity's next incarnation (Record.Returning).
func (c *Core) Returning() bool { return c.returning }

// Done reports whether the core has finished: the leave completed, the
// process must exit, or another process took the identity over.
func (c *Core) Done() bool { return c.done }

// Err returns the condition that keeps this replica from working normally,
// wrapping one of ErrDuplicateIdentity, ErrRing, ErrForeignFingerprint or
// ErrIdentityInUse; nil when there is none.
func (c *Core) Err() error { return c.err }
