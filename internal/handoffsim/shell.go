package handoffsim

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/shard"
)

// Shell drives one process's handoff core in the simulated world: the
// ring coordinator, say (see shard/ring/coordsim_test.go). It reads the
// ring and writes the own Lease through the Process it was built for (a
// membership), activates and revokes partitions through it (a participant),
// and runs its asynchronous work with Process.Go and Process.Post, so that
// the world schedules all of it.
type Shell interface {
	// Core returns the core the shell drives; the world reads it for its
	// checks and reports.
	Core() *handoff.Core
	// CachesSynced and Leave are the process's inputs: its controllers'
	// caches synced, SIGTERM.
	CachesSynced()
	Leave()
	// CacheChanged: the process's sharded cache (Process.SyncedPartitions) has
	// changed; feed it to the core and step.
	CacheChanged()
	// Step observes, decides and carries out what was decided, as the
	// shell's loop does after every input.
	Step()
}

// Process is one simulated process, as an external Shell sees it: a Lease
// membership (the methods of manager's membership interface), a
// participant (Activate, Revoke), its pod (Pod, GetPod: proofs of death),
// a clock, and a scheduler for asynchronous work. Every method must be called from the world's own
// goroutine or from a task started with Go.
type Process = proc

// Config returns the configuration the process's core must be built with.
func (p *proc) Config() handoff.Config {
	w := p.w
	return handoff.Config{
		Identity: p.id, Incarnation: p.inc, Ring: w.p.ring,
		Timing:              shard.Timing{LeaseDuration: w.p.leaseDuration, RenewDeadline: w.p.renewDeadline},
		PartitionCache:      w.p.partitionCache && !w.p.ignoreCacheSync,
		GarbageCollectAfter: w.p.gcAfter,
		KeepPlaceOnLeave:    w.p.keepPlace[p.id],
	}
}

// PartitionCached says whether the process has a sharded cache
// (Options.PartitionCache): the shell must then pass Ready.Hold to the
// process (Hold) and feed the core what SyncedPartitions returns whenever
// CacheChanged is called.
func (p *proc) PartitionCached() bool { return p.w.p.partitionCache }

// Context is cancelled when the process ends.
func (p *proc) Context() context.Context { return p.ctx }

// Now is the process's local clock.
func (p *proc) Now() time.Time { return p.local() }

// Exit ends the process (a shell asked for os.Exit).
func (p *proc) Exit(code int) {
	p.w.tracef("%s exit(%d): reconciles outlived the stop deadline", p, code)
	p.exit("exit")
}

// ---- scheduling: tasks as coroutines ----

// A task started with Go runs on its own goroutine, but only while the
// world waits for it: it runs until it returns or blocks on the world
// (a drain, a read), and is resumed by the event that ends the wait. So
// exactly one goroutine runs at a time, in an order the seed decides.
type task struct {
	wake, yield chan struct{}
	stopped     bool // the process ended while the task waited
}

type taskKey struct{}

// parking is a task blocked on the world, and whether it was resumed.
type parking struct {
	t       *task
	resumed bool
}

// Go runs f as a task of the process (a goroutine in production), until f
// returns or blocks on the world.
func (p *proc) Go(ctx context.Context, f func(context.Context)) {
	if !p.alive {
		return
	}
	t := &task{wake: make(chan struct{}), yield: make(chan struct{})}
	ctx = context.WithValue(ctx, taskKey{}, t)
	go func() {
		<-t.wake
		f(ctx)
		t.yield <- struct{}{}
	}()
	t.wake <- struct{}{}
	<-t.yield
}

// Post applies f on the shell's loop, followed by a step: a world event,
// after the current one, deferred while the process is paused.
func (p *proc) Post(f func()) {
	var apply func()
	apply = func() {
		if !p.alive || p.frozen(apply) {
			return
		}
		f()
		p.step()
	}
	p.w.after(0, apply)
}

// errStopped is what a blocking call returns when its process has ended.
var errStopped = errors.New("handoffsim: the process has ended")

// block parks the calling task until the wake function handed to arm is
// called (by a world event); it reports false when the process ended
// first. A call outside a task is a shell bug: it fails the seed.
func (p *proc) block(ctx context.Context, arm func(wake func())) bool {
	t, _ := ctx.Value(taskKey{}).(*task)
	if t == nil {
		p.w.fail("%s: a blocking call outside a task started with Go", p)
		return false
	}
	if !p.alive {
		return false
	}
	pk := &parking{t: t}
	p.parked = append(p.parked, pk)
	arm(func() {
		if pk.resumed {
			return
		}
		pk.resumed = true
		p.parked = slices.DeleteFunc(p.parked, func(o *parking) bool { return o == pk })
		t.wake <- struct{}{}
		<-t.yield
	})
	t.yield <- struct{}{}
	<-t.wake
	return !t.stopped
}

// stopCoroutines ends every task of the process still blocked: each of its
// blocking calls returns errStopped, so its goroutine finishes.
func (p *proc) stopCoroutines() {
	if p.cancel != nil {
		p.cancel()
	}
	for len(p.parked) > 0 {
		pk := p.parked[0]
		p.parked = p.parked[1:]
		pk.resumed, pk.t.stopped = true, true
		pk.t.wake <- struct{}{}
		<-pk.t.yield
	}
}

// ---- the external shell's step ----

// stepShell steps an external shell and checks what the built-in step
// checks.
func (p *proc) stepShell() {
	w := p.w
	p.shell.Step()
	if !p.alive || w.violation != "" {
		return
	}
	p.checkProofs()
	p.countLeaveTombstones()
	if lost := p.core.Active().Difference(p.core.Claim()); !lost.IsEmpty() {
		w.fail("%s core has %v active but not claimed", p, lost)
	}
	if p.keptPlace() {
		return
	}
	if p.core.Done() && !p.released {
		w.tracef("%s stops: %v", p, p.core.Err())
		p.exit("stopped")
		return
	}
	p.countJoin()
	p.scheduleWake()
}

// renewSucceeded reports a renew sent at sent (local time) that succeeded.
// The world keeps the latest for either shell: it is the lease validity's
// start (resume).
func (p *proc) renewSucceeded(sent time.Time) {
	if !p.renewed || sent.After(p.renewSent) {
		p.renewed, p.renewSent = true, sent
	}
	if p.shell == nil {
		p.core.RenewSucceeded(sent)
	}
}

// ---- membership ----

// Listed reports whether the informer has listed the ring.
func (p *proc) Listed() bool { return p.listed }

// Synced reports whether the informer has listed and the own Lease was
// written.
func (p *proc) Synced() bool { return p.listed && p.baseRV != 0 && !p.released }

// Snapshot returns the informer's Leases in the ring's view. The caller
// must not modify it.
func (p *proc) Snapshot() []membership.Observed { return p.snapshot }

// Departed returns the Leases that left the view, per identity in the
// order they left (membership.Member.Departed). The caller must not modify it.
func (p *proc) Departed() []membership.Observed { return p.departedObs }

// splitObserved sets what Snapshot and Departed return from the informer's
// content, as membership.Member reports it.
func (p *proc) splitObserved() {
	p.snapshot, p.departedObs = p.snapshot[:0], p.departedObs[:0]
	for _, o := range p.observed {
		if o.Gone {
			p.departedObs = append(p.departedObs, membership.Observed{Observed: o, Name: o.Identity})
		} else {
			p.snapshot = append(p.snapshot, membership.Observed{Observed: o, Name: o.Identity})
		}
	}
}

// Changes is never signalled: the world steps the shell itself.
func (p *proc) Changes() <-chan struct{} { return nil }

// LastRenew returns when the last successful renew was sent.
func (p *proc) LastRenew() (time.Time, bool) { return p.renewSent, p.renewed }

// SetDesired makes r what the Lease client writes, and writes it.
func (p *proc) SetDesired(r handoff.Record) {
	if p.alive && !p.released {
		p.publish(r)
	}
}

// TakeOver allows overwriting the own Lease at version once.
func (p *proc) TakeOver(version string) {
	if p.alive && p.mayTakeOver(version) {
		p.sendWrite()
	}
}

// ReadPeer reads identity's Lease directly, as membership.Member.ReadPeer does:
// a Lease relabelled out of the ring reads as not found. The world checks,
// as the answer leaves, that nothing of a holder whose Lease still shows
// ref.Version still runs.
func (p *proc) ReadPeer(ctx context.Context, ref handoff.LeaseRef) (handoff.LeaseRead, error) {
	var cur *storedLease
	var failed bool
	ok := p.block(ctx, func(wake func()) {
		p.readLease(ref, func(l *storedLease, f bool) {
			cur, failed = l, f
			wake()
		})
	})
	switch {
	case !ok:
		return handoff.LeaseRead{}, errStopped
	case failed:
		return handoff.LeaseRead{}, errors.New("handoffsim: confirming read timed out (cut off from the API server)")
	case cur == nil:
		return handoff.LeaseRead{}, nil
	}
	return handoff.LeaseRead{Found: true, UID: strconv.FormatUint(cur.uid, 10), Version: strconv.FormatUint(cur.rv, 10)}, nil
}

// DeletePeer deletes identity's Lease at version.
func (p *proc) DeletePeer(ctx context.Context, identity, version string) error {
	ok := p.block(ctx, func(wake func()) {
		p.garbageCollect(handoff.LeaseRef{Identity: identity, Version: version})
		p.w.after(p.w.latency()+p.w.latency(), wake) // the response; it may arrive before the request lands, which only the log would see
	})
	if !ok {
		return errStopped
	}
	return nil
}

// Delete stops the Lease client and deletes the own Lease (graceful leave);
// the process exits once that is done. It returns at once: the world
// carries the deletion out.
func (p *proc) Delete(context.Context) error {
	if p.alive && !p.released {
		p.leaveComplete()
	}
	return nil
}

// ---- participant ----

// Activate admits set. Before the faults stop, 2% of activations fail (a
// replay that failed), which the shell must ask for again.
func (p *proc) Activate(_ context.Context, set shard.PartitionSet) error {
	w := p.w
	if !p.alive {
		return errStopped
	}
	if !w.quiet && w.rng.IntN(100) < 2 {
		w.tracef("%s activation of %v fails", p, set)
		return errors.New("handoffsim: replay failed")
	}
	p.activate(set)
	return nil
}

// revoker is a Revoke waiting for its partitions to drain.
type revoker struct {
	set  shard.PartitionSet
	wake func()
}

// Revoke stops admitting set, drains it (with no grace period when fence)
// and returns once nothing of it runs.
func (p *proc) Revoke(ctx context.Context, set shard.PartitionSet, fence bool) error {
	w := p.w
	if !p.alive {
		return errStopped
	}
	if fence {
		w.tracef("%s FENCE (active %v, inflight %v)", p, p.active, p.inflight)
		p.fenceAt = w.now
	}
	for q := range set.All() {
		switch {
		case p.active.Has(q):
			p.active.Remove(q)
			p.startDrain(q)
		case w.runningBy[q] == p && !p.inflight.Has(q):
			w.fail("%s revoked %d, which it runs but not as active", p, q)
			return errStopped
		}
		if fence && p.inflight.Has(q) && !p.stuck[q] {
			// Zero grace: a reconcile that honours cancellation returns now.
			p.finishDrainAfter(q, w.between(0, 20*time.Millisecond))
		}
	}
	w.tracef("%s revoke %v", p, set)
	if fence && !p.active.IsEmpty() {
		w.fail("%s still has %v active after Fence", p, p.active)
	}
	if p.inflight.Intersect(set).IsEmpty() {
		return nil
	}
	if !p.block(ctx, func(wake func()) { p.revokers = append(p.revokers, revoker{set: set, wake: wake}) }) {
		return errStopped
	}
	return nil
}

// wakeRevokers resumes the Revokes whose partitions have all drained.
func (p *proc) wakeRevokers() {
	for i := 0; i < len(p.revokers); {
		r := p.revokers[i]
		if !p.inflight.Intersect(r.set).IsEmpty() {
			i++
			continue
		}
		p.revokers = slices.Delete(p.revokers, i, i+1)
		r.wake()
	}
}
