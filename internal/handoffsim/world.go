package handoffsim

import (
	"container/heap"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kshard/kshard/internal/assign"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/internal/handoffhook"
	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/shard"
)

// This file is the simulated world the deterministic simulation runs the
// core in: an API server with one ordered log of Lease writes, replicas
// with drifting clocks, lagging watches, failing and late-landing writes,
// controllers whose reconciles take time to drain, and the faults the design
// must survive. Everything is driven by one seeded PRNG and one event queue,
// so a seed replays exactly.

// simParams are the timings and fault rates of one seed.
type simParams struct {
	identities    int
	ring          shard.Config
	leaseDuration time.Duration
	renewDeadline time.Duration
	renewPeriod   time.Duration
	clientTimeout time.Duration // ≤ LeaseDuration − RenewDeadline, the documented precondition
	maxDriftPPM   int64
	faultsEnd     time.Duration
	faultEvery    time.Duration // mean time between faults
	maxDrain      time.Duration // drain time of a reconcile that honours cancellation
	maxStuck      time.Duration // drain time of one that ignores it
	stuckPercent  int
	maxWatchDelay time.Duration // normal watch lag
	maxSlowWatch  time.Duration // watch lag during a slow-watch fault
	maxCutOff     time.Duration // longest partition from the API server
	writeFailPct  int           // writes that fail without landing
	writeLostPct  int           // writes that time out; half of them land anyway
	// Faults against the core's other assumptions (assumptions.go).
	clockSkewPPM int64 // clock-rate fault: a replica's clock runs at 1 ± up to this; 0: no such fault
	staleView    bool  // stale-view fault: a replica's informer shows an older state of a peer's Lease
	staleAcross  bool  // the stale state may be one of an earlier incarnation (not defended)
	// partitionCache: sharded caches (cache.go); ignoreCacheSync builds
	// the cores without the synced-before-act rule.
	partitionCache, ignoreCacheSync bool
	// finalizers: the fleet puts the member finalizer on its Leases
	// (fast join, terminating Leases, Finalize); without it, as with an
	// older kshard, a deletion by hand is immediate and no core may skip
	// its join wait.
	finalizers bool
	// gcAfter is the cores' GarbageCollectAfter: 1–2 LeaseDurations in a
	// quarter of the seeds (Options.CollectEarly: all), so that expired
	// Leases are collected within the seed; 0 in the others, the default
	// (10× LeaseDuration, later than seeds end: nothing is collected).
	gcAfter time.Duration
	// keepPlace: identities whose cores keep their place in the ring on a
	// graceful leave (handoff.Config.KeepPlaceOnLeave); nil in half the
	// seeds (Options.KeepPlace: every identity in every seed).
	keepPlace map[string]bool
}

// livenessBound is how long after the faults stop, or after the last replica
// that was fenced by them exits (settledAt), every partition must be active
// on exactly one live member: a dead replica's Lease expires one
// LeaseDuration after its last write, which is at its death (at the latest at
// settledAt) or up to one client timeout later for a write that was in
// flight; the drain of the handoffs that follow takes at most maxStuck; the
// last second covers the few watch, write and confirm round trips between.
// A balanced ring (Options.Balance) adds one more move: placed by number
// until every partition's count is known, it moves once by weight when the
// last count comes in (up to maxCountLag after its LIST), which costs the
// new owners another LIST and the old ones another drain.
func (p simParams) livenessBound() time.Duration {
	d := p.leaseDuration + p.clientTimeout + p.maxStuck + p.maxListing()
	if p.ring.Balance > 0 {
		d += maxCountLag + p.maxListing() + p.maxStuck
	}
	return p.slowest(d) + time.Second
}

// maxListing is how long a sharded cache may take to list a gained
// partition once the faults have stopped: a slow LIST, after a failed one's
// retry delay (cache.go); 0 without sharded caches.
func (p simParams) maxListing() time.Duration {
	if !p.partitionCache {
		return 0
	}
	return maxListTime + maxListRetry
}

// takeoverBound is how long after the faults stop a process may still learn
// that another process of its identity took its Lease over: when the faults
// left that Lease damaged (no incarnation to tell whose it is), the taker
// waits for it to expire, one LeaseDuration after its last write, which may
// land up to a client timeout after the faults stop; the last second covers
// the takeover's write and its watch event.
func (p simParams) takeoverBound() time.Duration {
	return p.slowest(p.leaseDuration+p.clientTimeout) + time.Second
}

// falloutBound is how long after the faults stop a replica that lost its
// renewals during them may still exit: at its stop deadline, counted from a
// renew sent before the faults stopped.
func (p simParams) falloutBound() time.Duration {
	return p.slowest(p.renewDeadline + (p.leaseDuration-p.renewDeadline)/2)
}

func randomParams(rng *rand.Rand) simParams {
	ld := 10 * time.Second
	primes := []int{1, 2, 3, 5, 7, 11, 13, 31, 61}
	return simParams{
		identities:    2 + rng.IntN(6),
		ring:          shard.Config{Partitions: primes[rng.IntN(len(primes))], ReplicationFactor: 4},
		leaseDuration: ld,
		renewDeadline: ld * 2 / 3,
		renewPeriod:   ld/5 + time.Duration(rng.Int64N(int64(ld/10))),
		clientTimeout: ld - ld*2/3,
		maxDriftPPM:   10000, // ±1 % clock rate
		faultsEnd:     time.Second + time.Duration(rng.Int64N(int64(2*ld))),
		faultEvery:    300*time.Millisecond + time.Duration(rng.Int64N(int64(2*time.Second))),
		maxDrain:      300 * time.Millisecond,
		maxStuck:      4 * time.Second,
		stuckPercent:  rng.IntN(10),
		maxWatchDelay: 50 * time.Millisecond,
		maxSlowWatch:  5 * time.Second,
		maxCutOff:     2 * ld,
		writeFailPct:  rng.IntN(6),
		writeLostPct:  rng.IntN(6),
	}
}

// ---- event queue ----

type event struct {
	at  time.Duration
	seq uint64
	fn  func()
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// ---- API server ----

type storedLease struct {
	rec handoff.Record
	rv  uint64
	uid uint64 // changes when the Lease is created afresh
	// relabelled: a third party moved the Lease out of the ring's label
	// selector; the ring's watches no longer show it.
	relabelled bool
	// damaged: a third party broke its format; it parses with a Problem.
	damaged bool
	// deleted: (informer caches only) the Lease's last state before the
	// deletion at rv.
	deleted bool
	// finalized: it carries the member finalizer; terminating: deleted
	// while finalized, it stays until the finalizer is removed.
	finalized, terminating bool
}

type logEntry struct {
	identity string
	lease    *storedLease // nil: deleted
	gone     *storedLease // for a deletion: the last state, at the deletion's rv
}

// apiServer is etcd behind the API server: one ordered log, resourceVersions
// increasing, writes conditional on the resourceVersion (Update semantics).
type apiServer struct {
	rv     uint64
	uids   uint64
	leases map[string]*storedLease
	log    []logEntry
}

// put creates (base 0) or updates (base = current resourceVersion) a Lease.
// With finalize, as membership.Member does, it creates the Lease with the member
// finalizer and adds it back on an update, except to a terminating Lease
// (the API server forbids that); an update keeps a Lease terminating.
func (s *apiServer) put(identity string, rec handoff.Record, base uint64, finalize bool) (uint64, bool) {
	cur := s.leases[identity]
	if (base == 0) != (cur == nil) || (cur != nil && cur.rv != base) {
		return 0, false
	}
	l := &storedLease{rec: rec, finalized: finalize}
	if cur != nil {
		l.uid, l.terminating = cur.uid, cur.terminating
		l.finalized = cur.finalized || finalize && !cur.terminating
	}
	s.write(identity, l)
	return s.rv, true
}

// write stores l unconditionally under a new resourceVersion.
func (s *apiServer) write(identity string, l *storedLease) {
	s.rv++
	l.rv = s.rv
	if l.uid == 0 {
		s.uids++
		l.uid = s.uids
	}
	s.leases[identity] = l
	s.log = append(s.log, logEntry{identity: identity, lease: l})
}

// del deletes a Lease if it is at resourceVersion rv. A finalized one
// becomes terminating instead (same uid and content, a new version), or
// stays so.
func (s *apiServer) del(identity string, rv uint64) bool {
	cur := s.leases[identity]
	if cur == nil || cur.rv != rv {
		return false
	}
	if cur.finalized {
		if !cur.terminating {
			l := *cur
			l.rec, l.terminating = cur.rec.Clone(), true
			s.write(identity, &l)
		}
		return true
	}
	s.remove(identity)
	return true
}

// unfinalize removes the member finalizer from the Lease at rv (a leave's
// or Finalize's write): a terminating Lease is then deleted. deleted says
// so; nv is the new version otherwise.
func (s *apiServer) unfinalize(identity string, rv uint64) (nv uint64, deleted, ok bool) {
	return s.update(identity, rv, nil)
}

// release writes membership.Released over the Lease at rv (a peer's
// collection): the member finalizer removed, state leaving, an empty claim
// over partitions; a terminating Lease is then deleted, in that state.
func (s *apiServer) release(identity string, rv uint64, partitions int) (nv uint64, deleted, ok bool) {
	return s.update(identity, rv, func(r *handoff.Record) {
		r.State, r.Claim, r.Returning = handoff.StateLeaving, shard.NewPartitionSet(partitions), false
	})
}

// update removes the finalizer from the Lease at rv and applies edit to a
// copy of its Record (nil: none); a terminating Lease is then deleted.
func (s *apiServer) update(identity string, rv uint64, edit func(*handoff.Record)) (nv uint64, deleted, ok bool) {
	cur := s.leases[identity]
	if cur == nil || cur.rv != rv {
		return 0, false, false
	}
	l := *cur
	l.rec, l.finalized = cur.rec.Clone(), false
	if edit != nil {
		edit(&l.rec)
	}
	if cur.terminating {
		s.leases[identity] = &l // the deletion's last state
		s.remove(identity)
		return s.rv, true, true
	}
	s.write(identity, &l)
	return s.rv, false, true
}

// remove deletes the Lease of identity.
func (s *apiServer) remove(identity string) {
	cur := s.leases[identity]
	s.rv++
	delete(s.leases, identity)
	last := *cur
	last.rv, last.deleted = s.rv, true
	s.log = append(s.log, logEntry{identity: identity, gone: &last})
}

// ---- world ----

type world struct {
	seed  uint64
	rng   *rand.Rand
	p     simParams
	now   time.Duration
	seq   uint64
	queue eventQueue
	steps int

	server  apiServer
	kubelet simKubelet // pods and their kubelets (proof.go)
	procs   []*proc    // every process ever started, in start order
	incs    int        // incarnations started, for naming

	runningBy []*proc // runningBy[q]: the process reconciling partition q, if any
	rings     map[string]*assign.Ring

	quiet      bool          // faults have stopped
	faultsOver time.Duration // faultsEnd, or the end of a pause that outlasts it
	pauses     int           // pause faults injected
	tampers    int           // third-party Lease edits injected
	// Clock-rate and stale-view faults injected (assumptions.go).
	clockFaults, staleViews int
	// LISTs of the sharded caches (cache.go).
	lists, slowLists, failedLists int
	// objects[q] is how many objects partition q holds (Options.Balance;
	// nil otherwise); countChanges and weightReports are Result's.
	objects                     []int
	countChanges, weightReports int
	// lab: the objects of a kind sharded by labels (labels.go); nil
	// without Options.Labels.
	lab *labelWorld
	// handovers counts partitions revoked after staying active until
	// their new owner's cache held them (Core.HandingOver).
	handovers int
	// Finalizers (finalize.go): Leases deleted by hand that became
	// terminating, Finalizes that completed a deletion, peers' collections
	// that did, processes that joined without the join wait, and join
	// scans that found a finalized Lease outside the ring.
	terminations, finalizes, collectedTerminating, fastJoins, uncleanScans int
	// collections: Leases a peer's garbage collection deleted.
	collections int
	// Graceful leaves, and (observer, leaver) pairs in which the observer
	// saw the leaver's Lease vanish with its claim still in force (its
	// watch merged the empty claim with the deletion): a tombstone that
	// delays the handoff by LeaseDuration.
	leaves, leaveTombstones int
	leftIncs                map[string]bool // incarnations that left gracefully
	keptPlaces              int             // graceful leaves that kept their place (KeepPlaceOnLeave)
	returns                 int             // incarnations that took over a Lease left for them
	tombstoned              map[string]bool // observer incarnation + "/" + leaver identity
	settledAt               time.Duration   // faults stopped and the fallout (exits of fenced replicas) ended
	converged               bool            // every partition is active on exactly one live member
	convergedSince          time.Duration   // when converged last became true
	end                     time.Duration

	violation string
	trace     *strings.Builder

	// newShell builds the shell of each process (Options.Shell); nil: the
	// built-in one (proc.step), which drives the core directly.
	newShell func(*Process) (Shell, error)
}

var simEpoch = time.Unix(1_700_000_000, 0)

// newWorld sets up seed's world with the faults opts asks for (its
// defaults applied already).
func newWorld(seed uint64, opts Options) *world {
	rng := rand.New(rand.NewPCG(seed, 0x6b7368617264))
	w := &world{seed: seed, rng: rng, p: randomParams(rng)}
	w.p.clockSkewPPM = max(opts.ClockSkewPPM, 0)
	w.p.staleView, w.p.staleAcross = !opts.NoStaleViews, opts.StaleAcross
	w.p.partitionCache, w.p.ignoreCacheSync = opts.PartitionCache || opts.Balance, opts.IgnoreCacheSync
	if opts.Balance {
		w.p.ring.Scheme, w.p.ring.Balance = shard.SchemeNamespace, 0.05
		// Drawn from a stream of their own, like gc below.
		objects := rand.New(rand.NewPCG(seed, 0x62616c616e6365))
		w.objects = make([]int, w.p.ring.Partitions)
		for q := range w.objects {
			w.objects[q] = objects.IntN(200)
		}
	}
	if opts.LongFaults {
		w.p.faultsEnd = 30*time.Second + 2*w.p.faultsEnd
	}
	w.newShell = opts.Shell
	w.lab = newLabelWorld(w, seed, opts)
	w.p.finalizers = rng.IntN(4) != 0
	// Drawn from a stream of their own, so that the seed's other choices
	// stay what they were before collection ran in some seeds.
	gc := rand.New(rand.NewPCG(seed, 0x636f6c6c656374))
	if gc.IntN(4) == 0 || opts.CollectEarly {
		w.p.gcAfter = w.p.leaseDuration + time.Duration(gc.Int64N(int64(w.p.leaseDuration)))
	}
	// Drawn from a stream of its own too, as are the identities it picks.
	keep := rand.New(rand.NewPCG(seed, 0x6b65657020706c61))
	if keep.IntN(2) == 0 || opts.KeepPlace {
		w.p.keepPlace = map[string]bool{}
		for i := range w.p.identities {
			w.p.keepPlace[w.identity(i)] = opts.KeepPlace || keep.IntN(4) != 0
		}
	}
	tracing := opts.Trace
	w.server.leases = map[string]*storedLease{}
	w.rings = map[string]*assign.Ring{}
	w.runningBy = make([]*proc, w.p.ring.WithDefaults().Partitions)
	if tracing {
		w.trace = &strings.Builder{}
	}
	return w
}

// ring is assign.NewWeighted for the cores, memoised per seed: rings are
// immutable and depend only on their inputs, and building them dominates
// the cost of the simulation otherwise.
func (w *world) ring(cfg shard.Config, members []string, weights assign.Weights) (*assign.Ring, error) {
	key := strings.Join(members, "\x00") + "\x01" + string(weights)
	if r, ok := w.rings[key]; ok {
		return r, nil
	}
	r, err := assign.NewWeighted(cfg, members, weights)
	if err == nil {
		w.rings[key] = r
	}
	return r, err
}

func (w *world) tracef(format string, args ...any) {
	if w.trace == nil {
		return
	}
	fmt.Fprintf(w.trace, "%9.3fs  ", w.now.Seconds())
	fmt.Fprintf(w.trace, format, args...)
	w.trace.WriteByte('\n')
}

func (w *world) fail(format string, args ...any) {
	if w.violation != "" {
		return
	}
	w.violation = fmt.Sprintf("t=%.3fs: ", w.now.Seconds()) + fmt.Sprintf(format, args...)
	w.tracef("VIOLATION %s", w.violation)
}

func (w *world) after(d time.Duration, fn func()) {
	w.seq++
	heap.Push(&w.queue, event{at: w.now + max(d, 0), seq: w.seq, fn: fn})
}

func (w *world) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(w.rng.Int64N(int64(hi-lo)))
}

func (w *world) latency() time.Duration { return w.between(time.Millisecond, 30*time.Millisecond) }

// run plays the seed to its end and returns the number of steps (events).
func (w *world) run() {
	w.tracef("params %+v", w.p)
	initial := 1 + w.rng.IntN(w.p.identities)
	for i := range initial {
		w.after(w.between(0, 500*time.Millisecond), func() { w.start(i) })
	}
	w.after(w.between(0, w.p.faultEvery), w.fault)
	w.after(w.p.faultsEnd, w.quiesce)
	if w.objects != nil {
		for range 1 + w.rng.IntN(4) {
			w.after(w.between(0, w.p.faultsEnd), w.changeCount)
		}
	}
	w.faultsOver = w.p.faultsEnd
	w.end = w.p.faultsEnd + w.p.falloutBound() + w.p.livenessBound() + time.Second
	for w.queue.Len() > 0 && w.violation == "" {
		e := heap.Pop(&w.queue).(event)
		if e.at > w.end {
			break
		}
		w.now = e.at
		e.fn()
		w.steps++
		if w.quiet {
			w.checkConvergence()
			if w.converged && w.now >= w.convergedSince+w.p.slowest(w.p.leaseDuration) && w.now >= w.faultsOver+w.p.falloutBound() {
				break // stable for a LeaseDuration: nothing pending can unsettle it
			}
		}
	}
	for _, p := range w.procs {
		p.stopCoroutines()
	}
	if w.violation == "" {
		switch {
		case !w.converged:
			w.fail("liveness: not every partition is active on exactly one live member %v after the faults settled (bound %v): %s",
				w.now-w.settledAt, w.p.livenessBound(), w.describeOwners())
		case w.convergedSince-w.settledAt > w.p.livenessBound():
			w.fail("liveness: converged %v after the faults settled, bound %v", w.convergedSince-w.settledAt, w.p.livenessBound())
		}
	}
}

// changeCount changes one partition's object count (Options.Balance), by
// a factor large enough to leave the cores' hysteresis, and has every live
// cache count again.
func (w *world) changeCount() {
	q := w.rng.IntN(len(w.objects))
	old := w.objects[q]
	w.objects[q] = w.rng.IntN(400)
	w.countChanges++
	w.tracef("objects in partition %d: %d → %d", q, old, w.objects[q])
	for _, p := range w.alive() {
		var recount func()
		recount = func() {
			if p.alive && !p.frozen(recount) {
				p.cacheChanged()
			}
		}
		w.after(w.latency(), recount)
	}
}

func (w *world) alive() []*proc {
	var out []*proc
	for _, p := range w.procs {
		if p.alive {
			out = append(out, p)
		}
	}
	return out
}

func (w *world) identity(i int) string { return "pod-" + strconv.Itoa(i) }

// start runs a new process for identity slot i.
func (w *world) start(i int) {
	if w.violation != "" {
		return
	}
	w.incs++
	p := &proc{
		w:        w,
		id:       w.identity(i),
		inc:      "i" + strconv.Itoa(w.incs),
		alive:    true,
		driftPPM: w.rng.Int64N(2*w.p.maxDriftPPM+1) - w.p.maxDriftPPM,
		offset:   time.Duration(w.rng.Int64N(int64(2*time.Hour))) - time.Hour,
		cache:    map[string]*storedLease{},
		departed: map[string][]departure{},
	}
	p.pcache = newPartCache(len(w.runningBy))
	p.startLabelCache()
	w.initialClockRate(p)
	np := w.p.ring.WithDefaults().Partitions
	p.active, p.inflight, p.disarmed = shard.NewPartitionSet(np), shard.NewPartitionSet(np), shard.NewPartitionSet(np)
	p.stuck, p.drainToken = make([]bool, np), make([]uint64, np)
	core, err := p.NewCore()
	if err != nil {
		w.fail("New: %v", err)
		return
	}
	p.pod = w.kubelet.podOf(p.id)
	core.SetPod(p.pod) // an external shell sets it on its own core (Process.Pod)
	p.core = core
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if w.newShell != nil {
		sh, err := w.newShell(p)
		if err != nil {
			w.fail("shell: %v", err)
			return
		}
		p.shell, p.core = sh, sh.Core()
	}
	if p.hooks() == nil {
		w.fail("shell: its core was not built by Process.NewCore, so the oracle cannot read it")
		return
	}
	w.procs = append(w.procs, p)
	w.tracef("%s start (drift %+dppm)", p, p.driftPPM)
	// The informer lists, then the controllers' caches sync.
	listed := w.between(5*time.Millisecond, 100*time.Millisecond)
	w.after(listed, func() { p.deliver(len(w.server.log)) })
	w.after(listed+w.between(0, 500*time.Millisecond), func() {
		if p.alive {
			if p.shell != nil {
				p.shell.CachesSynced()
			} else {
				p.core.CachesSynced()
			}
			p.step()
		}
	})
	w.after(w.between(0, w.p.renewPeriod), p.renewLoop)
}

// fault injects one random fault and schedules the next.
func (w *world) fault() {
	if w.quiet || w.violation != "" {
		return
	}
	defer w.after(w.between(0, 2*w.p.faultEvery), w.fault)
	alive := w.alive()
	pick := func() *proc {
		if len(alive) == 0 {
			return nil
		}
		return alive[w.rng.IntN(len(alive))]
	}
	if w.assumptionFault(pick) {
		return
	}
	switch k := w.rng.IntN(100); {
	case k < 20: // join (or restart) an identity that has no live process
		var free []int
		for i := range w.p.identities {
			if !slices.ContainsFunc(alive, func(p *proc) bool { return p.id == w.identity(i) }) {
				free = append(free, i)
			}
		}
		if len(free) > 0 {
			w.start(free[w.rng.IntN(len(free))])
		}
	case k < 35: // crash
		if p := pick(); p != nil {
			p.exit("crash")
		}
	case k < 50: // graceful leave, sometimes followed by a restart (rolling update)
		if p := pick(); p != nil {
			p.leave()
		}
	case k < 62: // partition from the API server
		if p := pick(); p != nil && !p.cutOff {
			p.cutOff = true
			d := w.between(100*time.Millisecond, w.p.maxCutOff)
			w.tracef("%s cut off for %v", p, d)
			w.after(d, p.reconnect)
		}
	case k < 70: // stalled watch: the replica works, but sees nothing new for up to two LeaseDurations
		if p := pick(); p != nil && w.now >= p.stallUntil {
			p.stallUntil = w.now + w.between(w.p.leaseDuration/2, 2*w.p.leaseDuration)
			w.tracef("%s watch stalls until %.3fs", p, p.stallUntil.Seconds())
			w.after(p.stallUntil-w.now, func() { p.watch(len(w.server.log)) })
		}
	case k < 75: // slow watch
		if p := pick(); p != nil {
			p.slowUntil = w.now + w.between(time.Second, 2*w.p.leaseDuration)
			p.slowMax = w.between(100*time.Millisecond, w.p.maxSlowWatch)
			w.tracef("%s watch slow (≤%v) until %.3fs", p, p.slowMax, p.slowUntil.Seconds())
		}
	case k < 85: // flapping: a member joins and leaves again soon (A → AB → A)
		for i := range w.p.identities {
			if !slices.ContainsFunc(alive, func(p *proc) bool { return p.id == w.identity(i) }) {
				w.start(i)
				p := w.procs[len(w.procs)-1]
				w.after(w.between(0, 3*time.Second), func() {
					if !w.quiet {
						p.leave()
					}
				})
				break
			}
		}
	case k < 88: // a third party deletes, relabels or damages a member's Lease (kubectl)
		if p := pick(); p != nil {
			w.tamper(p.id)
		}
	case k < 89: // a process stops executing (SIGSTOP, a frozen VM) for 1.1–3 LeaseDurations, preferably with a write in flight
		var p *proc
		for _, o := range alive {
			if o.writing && !o.paused() {
				p = o
				break
			}
		}
		if p == nil {
			p = pick()
		}
		if p != nil && !p.paused() {
			w.pause(p, w.between(w.p.leaseDuration*11/10, 3*w.p.leaseDuration))
		}
	case k < 90: // replacement: a cut-off replica's pod is force-deleted and a new process takes its identity
		// Sometimes one that is not cut off: its kubelet is down, its
		// process runs on (the pod's death is not proven).
		if p := pick(); p != nil && (p.cutOff || w.rng.IntN(3) == 0) {
			i, _ := strconv.Atoi(strings.TrimPrefix(p.id, "pod-"))
			w.tracef("%s replaced while cut off (%v) or its kubelet is down", p, p.cutOff)
			w.forceDelete(p.id)
			w.start(i)
		}
	default: // a burst of duplicate watch deliveries (informer resync), or a relist
		if p := pick(); p != nil {
			if w.rng.IntN(2) == 0 {
				p.relist()
			} else {
				p.deliver(p.cursor)
			}
		}
	}
}

// pause freezes p for d: nothing of it runs (its events wait), but requests
// it sent are on the wire and land; its reconciles are frozen mid-flight.
func (w *world) pause(p *proc, d time.Duration) {
	w.pauses++
	p.pausedUntil = w.now + d
	p.overrun = shard.NewPartitionSet(len(p.stuck))
	w.tracef("%s PAUSED for %v (writing %v, running %v)", p, d, p.writing, p.running())
	if end := p.pausedUntil; end > w.faultsOver {
		w.faultsOver = end
		w.end = max(w.end, end+w.p.falloutBound()+w.p.livenessBound()+time.Second)
	}
	w.after(d, p.resume)
}

// tamper plays an operator editing the Lease of identity by hand: deleting
// it, relabelling it out of the ring, or breaking its format (sometimes the
// incarnation too). No precondition: kubectl does not send one.
func (w *world) tamper(identity string) {
	cur := w.server.leases[identity]
	if cur == nil {
		return
	}
	w.tampers++
	switch w.rng.IntN(3) {
	case 0:
		w.tracef("THIRD PARTY deletes %s's Lease (rv %d, finalized %v, terminating %v)", identity, cur.rv, cur.finalized, cur.terminating)
		if cur.finalized && !cur.terminating {
			w.terminations++
		}
		w.server.del(identity, cur.rv)
	case 1:
		w.tracef("THIRD PARTY relabels %s's Lease (rv %d)", identity, cur.rv)
		w.server.write(identity, &storedLease{rec: cur.rec.Clone(), uid: cur.uid, relabelled: true, damaged: cur.damaged,
			finalized: cur.finalized, terminating: cur.terminating})
	default:
		rec := cur.rec.Clone()
		if w.rng.IntN(2) == 0 {
			rec.Incarnation = ""
		}
		w.tracef("THIRD PARTY damages %s's Lease (rv %d, incarnation %q)", identity, cur.rv, rec.Incarnation)
		w.server.write(identity, &storedLease{rec: rec, uid: cur.uid, damaged: true, finalized: cur.finalized, terminating: cur.terminating})
	}
	w.afterMutation(identity, true)
}

// quiesce stops the faults: partitions heal and watches speed up. Leaves in
// progress complete; crashed replicas stay down.
func (w *world) quiesce() {
	w.quiet = true
	w.settledAt = w.now
	w.tracef("faults stop")
	alive := w.alive()
	for _, p := range alive {
		p.slowUntil = 0
		if p.stallUntil > w.now {
			p.stallUntil = 0
			p.watch(len(w.server.log))
		}
		if p.cutOff {
			p.reconnect()
		}
	}
	w.keepOneMember()
	w.checkConvergence()
}

// checkConvergence tracks whether every partition is active on exactly one
// live member (the overlap check makes "at most one" hold always).
func (w *world) checkConvergence() {
	ok := true
	for q, p := range w.runningBy {
		if p == nil || !p.active.Has(q) {
			ok = false
			break
		}
	}
	if ok && !w.converged {
		w.convergedSince = w.now
		w.tracef("converged")
	}
	w.converged = ok
}

func (w *world) describeOwners() string {
	var b strings.Builder
	for q, p := range w.runningBy {
		switch {
		case p == nil:
			fmt.Fprintf(&b, "%d:- ", q)
		case !p.active.Has(q):
			fmt.Fprintf(&b, "%d:%s(draining) ", q, p)
		default:
			fmt.Fprintf(&b, "%d:%s ", q, p)
		}
	}
	for _, p := range w.alive() {
		fmt.Fprintf(&b, "| %s state=%s view=%v target=%v claim=%v active=%v draining=%v blocked=%v err=%v ",
			p, p.core.State(), p.core.View(), p.core.Target(), p.core.Claim(), p.core.Active(), p.core.Draining(), p.core.Blocked(), p.core.Err())
	}
	return b.String()
}

// afterMutation checks that every live process of identity whose Lease it
// still is has published claims for everything it is running: claims are
// dropped only after drain. A third party (thirdParty) may drop them, and
// another process may then create the Lease afresh: peers' tombstones and
// ghosts keep the claims in force, which the overlap check judges.
func (w *world) afterMutation(identity string, thirdParty ...bool) {
	cur := w.server.leases[identity]
	for _, p := range w.procs {
		if !p.alive || p.id != identity || len(thirdParty) > 0 {
			continue
		}
		if cur == nil || cur.rec.Incarnation != p.inc {
			// Deleted by hand, and perhaps created again by another
			// process of this identity: peers' tombstones and ghosts keep
			// the claim in force; the overlap check judges the outcome.
			continue
		}
		if lost := p.running().Difference(cur.rec.Claim); !lost.IsEmpty() {
			w.fail("%s runs %v but its Lease (rv %d) no longer claims them", p, lost, w.server.rv)
		}
	}
	// Every live process learns of the write after its own watch delay.
	upTo := len(w.server.log)
	for _, p := range w.procs {
		if p.alive {
			p.watch(upTo)
		}
	}
}

// ---- processes ----

// proc is one process: the core plus the shell around it (Lease client,
// informer, controllers), as manager/ and lease/ will build it.
type proc struct {
	w       *world
	id, inc string
	core    *handoff.Core
	// hooks: the simulation's hooks of each core NewCore built for the
	// process (the world's, and the shell's that replaces it), by core.
	coreHooks map[*handoff.Core]*handoffhook.Hooks
	alive     bool
	cutOff    bool
	leaving   bool
	driftPPM  int64
	offset    time.Duration
	// The clock reads offset+clockL0 at world time clockT0 and runs at
	// 1+driftPPM/10⁶ since (setClockRate moves clockT0 and clockL0).
	clockT0, clockL0 time.Duration

	// Lease client: one write in flight at a time.
	rec        *handoff.Record
	baseRV     uint64 // resourceVersion of the own Lease as last written or read; 0: create
	takeOverRV uint64 // Ready.TakeOver: a version of another writer that may be overwritten
	writing    bool
	dirty      bool // a newer Record is waiting for the write in flight
	released   bool // DeleteLease: write no more
	// unfinalized: the graceful leave removed the finalizer (baseRV is
	// that write's version); finalizing: a Finalize is in flight.
	unfinalized, finalizing bool

	// Informer.
	cursor int // log entries delivered
	cache  map[string]*storedLease
	// departed: per identity, the earlier Lease objects (UIDs) that left
	// the view, in their last state and in the order they left; the cache
	// holds the latest object. membership.Member reports them per name and UID
	// for 4×LeaseDuration, across the name's re-creation.
	departed   map[string][]departure
	observed   []handoff.Observed
	slowUntil  time.Duration
	slowMax    time.Duration
	stallUntil time.Duration // the watch delivers nothing before this

	// Controllers.
	active     shard.PartitionSet
	inflight   shard.PartitionSet // revoked, reconciles still running
	stuck      []bool             // the in-flight reconcile ignores cancellation
	drainToken []uint64

	// Pause: until pausedUntil nothing of the process runs. overrun holds
	// partitions a peer activated while this process was frozen with a
	// reconcile of them in flight.
	pausedUntil time.Duration
	overrun     shard.PartitionSet
	// disarmed holds partitions whose reconcile in flight ran into a pause
	// that outlasted the lease validity, from the resume until it returns:
	// the worker starts none after it and the client transport refuses
	// every write of one started before it (docs/design.md, "Pauses and late
	// writes"), so it runs on writing nothing, and is not active.
	disarmed shard.PartitionSet

	wakeAt  time.Duration // pending deadline wake-up; 0: none
	fenceAt time.Duration // when the last Fence was applied

	// An external shell (Options.Shell) and what it reads through
	// Process: its context (cancelled when the process ends), whether the
	// informer has listed, the latest successful renew, and its work
	// parked on the simulated world.
	shell     Shell
	ctx       context.Context
	cancel    context.CancelFunc
	listed    bool
	renewed   bool
	renewSent time.Time
	parked    []*parking
	revokers  []revoker
	// snapshot and departedObs: the informer's content as Snapshot and
	// Departed report it.
	snapshot, departedObs []membership.Observed

	// Sharded cache (cache.go), with Options.PartitionCache.
	pcache partCache

	// Join scan (finalize.go): its state, the ring Lease uids it listed,
	// when the first Observe was, and whether the join was counted.
	scan          int
	scanUIDs      []uint64
	firstObserved time.Time // local
	joined        bool
	// firstUnfinalized: the first Observe showed a Lease without the
	// finalizer, so the core must wait.
	firstUnfinalized bool

	// Proof of death (proof.go).
	pod     string                          // UID of the pod it runs in
	proving map[handoff.Death]time.Duration // when each question was last read (built-in shell)
}

func (p *proc) String() string { return p.id + "#" + p.inc }

// local is the process's clock: its own offset and rate.
func (p *proc) local() time.Time {
	t := int64(p.w.now - p.clockT0)
	return simEpoch.Add(p.offset + p.clockL0 + time.Duration(t+t/1_000_000*p.driftPPM+(t%1_000_000)*p.driftPPM/1_000_000))
}

// globalAt converts a local time of this process to the earliest world time
// at which its clock reads at least local.
func (p *proc) globalAt(local time.Time) time.Duration {
	x := local.Sub(simEpoch) - p.offset - p.clockL0
	if x <= 0 {
		return p.clockT0
	}
	saved := p.w.now
	defer func() { p.w.now = saved }()
	g := p.clockT0 + time.Duration(float64(x)*1e6/float64(1_000_000+p.driftPPM))
	for p.w.now = g; p.local().Before(local); p.w.now = g {
		g++
	}
	for g > p.clockT0 {
		if p.w.now = g - 1; p.local().Before(local) {
			break
		}
		g--
	}
	return g
}

func (p *proc) running() shard.PartitionSet { return p.active.Union(p.inflight) }

// armed is what p runs that may still write: all but the disarmed.
func (p *proc) armed() shard.PartitionSet { return p.running().Difference(p.disarmed) }

func (p *proc) paused() bool { return p.w.now < p.pausedUntil }

// frozen defers fn to the end of a pause; it reports whether it did.
func (p *proc) frozen(fn func()) bool {
	if !p.paused() {
		return false
	}
	p.w.after(p.pausedUntil-p.w.now, fn)
	return true
}

// resume ends a pause. The first thing the process does is a step of its
// core, which must fence at once if a peer took over a partition it was
// running: its frozen reconciles may run on, but the manager's transport
// refuses their writes once the lease validity has passed (issue 11), so
// for the keys they stop here.
func (p *proc) resume() {
	if !p.alive {
		return
	}
	w := p.w
	w.tracef("%s resumes (overrun %v)", p, p.overrun)
	if w.quiet {
		// A pause that outlasts the faults is one: liveness counts from
		// its end.
		w.settledAt = max(w.settledAt, w.now)
	}
	fencedBefore, coreFenced := p.fenceAt, p.core.Fenced()
	// The validity (the last successful renew's sending time plus
	// RenewDeadline, on the process's clock) as it stands before anything
	// runs: a renew sent after it passed starts a new epoch, which does not
	// revive the reconciles of the old one.
	expired := !p.renewed || !p.local().Before(p.renewSent.Add(w.p.renewDeadline))
	frozen := p.running()
	if !p.writing && p.rec != nil && !p.released && w.rng.IntN(2) == 0 {
		// The Lease client runs before the core: a renew sent after the
		// pause has succeeded by the core's first step, so the core sees
		// itself recently renewed. It must fence all the same.
		if rv, ok := w.server.put(p.id, p.rec.Clone(), p.baseRV, w.p.finalizers); ok {
			w.tracef("%s renews first on resuming rv=%d", p, rv)
			w.afterMutation(p.id)
			p.baseRV = rv
			p.renewSucceeded(p.local())
		}
	}
	p.step()
	if !p.overrun.IsEmpty() && p.alive && p.fenceAt == fencedBefore && (coreFenced || !p.core.Fenced()) {
		// (A Ready the shell dropped is asked for again at once: what
		// counts is that the core fenced in this step.)
		w.fail("%s resumed after peers took over %v but did not fence at once", p, p.overrun)
	}
	p.overrun = shard.NewPartitionSet(len(p.stuck))
	if expired {
		// Those the first step revoked: the gate admits nothing of them
		// in the new epoch, so what drains is what the pause froze. One
		// still active may start reconciles that write: not disarmed.
		p.disarmed = frozen.Intersect(p.inflight)
		if !p.disarmed.IsEmpty() {
			w.tracef("%s resumed past its lease validity: the reconciles of %v write nothing more", p, p.disarmed)
		}
	}
}

// step runs the core and carries out its Ready.
func (p *proc) step() {
	if !p.alive || p.w.violation != "" || p.frozen(p.step) {
		return
	}
	w := p.w
	if p.shell != nil {
		p.stepShell()
		return
	}
	waited := p.core.HandingOver()
	r := p.core.Ready(p.local())
	if !w.quiet && !r.IsEmpty() && w.rng.IntN(100) < 2 {
		// The shell drops this Ready (a failed application): nothing is
		// carried out or acknowledged; the next step must ask again.
		w.tracef("%s drops a Ready", p)
		w.after(w.between(time.Millisecond, 50*time.Millisecond), p.step)
		return
	}
	if r.Exit {
		w.tracef("%s exit: reconciles outlived the stop deadline", p)
		p.exit("exit")
		return
	}
	if r.Fence {
		w.tracef("%s FENCE (active %v, inflight %v)", p, p.active, p.inflight)
		p.fenceAt = w.now
	}
	for q := range r.Revoke.All() {
		if p.inflight.Has(q) {
			continue // asked again: its drain is under way
		}
		if !p.active.Has(q) {
			if w.runningBy[q] == p {
				w.fail("%s revoked %d, which it runs but not as active", p, q)
				return
			}
			// Its Activate was dropped: nothing of it runs, the drain is
			// immediate.
			w.after(0, func() {
				if p.alive {
					p.core.Drained(shard.NewPartitionSet(len(p.stuck), q))
					p.step()
				}
			})
			continue
		}
		p.active.Remove(q)
		p.startDrain(q)
	}
	if r.Fence {
		// Zero grace: every reconcile that honours cancellation returns now.
		for q := range p.inflight.All() {
			if !p.stuck[q] {
				p.finishDrainAfter(q, w.between(0, 20*time.Millisecond))
			}
		}
		if !p.active.IsEmpty() {
			w.fail("%s still has %v active after Fence", p, p.active)
		}
	}
	if !r.Revoke.IsEmpty() {
		w.tracef("%s revoke %v", p, r.Revoke)
		if held := r.Revoke.Intersect(waited); !held.IsEmpty() {
			w.handovers += held.Len()
			w.tracef("%s handed %v over after waiting for the new owner's cache", p, held)
		}
	}
	if r.TakeOver != nil && p.mayTakeOver(r.TakeOver.Version) {
		defer p.sendWrite()
	}
	if r.Publish != nil {
		p.publish(*r.Publish)
	}
	if w.p.partitionCache {
		p.holdCache(p.holdOf(r.Hold))
	}
	if !p.activate(r.Activate) {
		return
	}
	if lost := p.core.Active().Difference(p.core.Claim()); !lost.IsEmpty() {
		w.fail("%s core has %v active but not claimed", p, lost)
	}
	for _, ref := range r.Confirm {
		p.confirm(ref)
	}
	for _, ref := range r.GarbageCollect {
		p.garbageCollect(ref)
	}
	for _, d := range r.ProveDeath {
		p.proveDeath(d)
	}
	if r.Finalize != nil {
		p.finalize(*r.Finalize)
	}
	p.core.Advance(r) // everything above was carried out
	p.SetActive(p.core.Active())
	if r.DeleteLease {
		p.leaveComplete()
	} else if p.keptPlace() {
		return
	}
	if p.core.Done() && !r.DeleteLease {
		w.tracef("%s stops: %v", p, p.core.Err())
		p.exit("stopped")
		return
	}
	p.countJoin()
	p.scheduleWake()
}

// mayTakeOver records Ready.TakeOver: the shell may overwrite the own Lease
// at version. It reports whether that is news (a write should follow).
func (p *proc) mayTakeOver(version string) bool {
	rv, _ := strconv.ParseUint(version, 10, 64)
	if p.takeOverRV == rv {
		return false
	}
	p.w.tracef("%s may take over its Lease at rv %d", p, rv)
	p.takeOverRV = rv
	if !p.writing {
		p.baseRV = rv
	}
	return true
}

// publish makes rec what the Lease client writes, and writes it.
func (p *proc) publish(r handoff.Record) {
	w := p.w
	rec := r.Clone()
	w.tracef("%s publish gen=%d %s claim=%v returning=%v", p, rec.Generation, rec.State, rec.Claim, rec.Returning)
	if rec.Returning && rec.State == handoff.StateJoining && (p.rec == nil || !p.rec.Returning) {
		w.returns++
	}
	if p.rec == nil && len(rec.Weights) > 0 || p.rec != nil && !p.rec.Weights.Equal(rec.Weights) {
		w.weightReports++
		w.tracef("%s weights %v", p, rec.Weights)
	}
	if lost := p.running().Difference(rec.Claim); !lost.IsEmpty() {
		w.fail("%s publishes a claim without %v, which it still runs", p, lost)
	}
	p.rec = &rec
	p.sendWrite()
}

// activate admits set in the controllers; false after a violation.
func (p *proc) activate(set shard.PartitionSet) bool {
	w := p.w
	for q := range set.All() {
		if other := w.runningBy[q]; other != nil && other != p {
			switch {
			case other.paused():
				// A frozen reconcile: it must send nothing after resuming.
				w.tracef("%s activates %d while %s is frozen running it", p, q, other)
				other.overrun.Add(q)
			case other.disarmed.Has(q):
				w.tracef("%s activates %d while %s's reconcile of it, frozen past its validity, returns", p, q, other)
			default:
				w.fail("partition %d active on %s while %s still runs it", q, p, other)
				return false
			}
		}
		if p.inflight.Has(q) {
			w.fail("%s activates %d while its own drain of it is in flight", p, q)
		}
		if !p.cacheAdmits(q) {
			return false
		}
		w.runningBy[q] = p
		p.active.Add(q)
	}
	if !set.IsEmpty() {
		w.tracef("%s activate %v", p, set)
	}
	return true
}

// scheduleWake asks to be stepped at the core's next deadline.
func (p *proc) scheduleWake() {
	local, ok := p.core.NextDeadline()
	if !ok {
		return
	}
	at := p.globalAt(local)
	if p.wakeAt != 0 && p.wakeAt > p.w.now && p.wakeAt <= at {
		return // an earlier wake-up is pending; it will reschedule
	}
	p.wakeAt = at
	p.w.after(at-p.w.now, func() {
		if p.wakeAt == at {
			p.wakeAt = 0
			p.step()
		}
	})
}

// exit ends the process at once: its reconciles stop with it; its Lease stays.
func (p *proc) exit(why string) {
	if !p.alive {
		return
	}
	w := p.w
	w.tracef("%s %s (running %v)", p, why, p.running())
	p.alive = false
	p.stopCoroutines()
	if why == "crash" && w.rng.IntN(8) == 0 {
		w.forceDelete(p.id) // its node is lost: the pod GC removes it before the kubelet reports
	}
	w.reportEnd(p)
	for q, o := range w.runningBy {
		if o == p {
			w.runningBy[q] = nil
		}
	}
	i, _ := strconv.Atoi(strings.TrimPrefix(p.id, "pod-"))
	restart := func() {
		if !slices.ContainsFunc(w.alive(), func(o *proc) bool { return o.id == p.id }) {
			w.start(i)
		}
	}
	switch {
	case why == "left":
		w.leaves++
	case w.quiet:
		// A leave that cannot finish (its Lease tampered with while another
		// process took the identity) ends at the shutdown timeout; with
		// nothing running that is no fallout of the faults.
		late := why != "shutdown timeout" || !p.running().IsEmpty()
		bound := w.p.falloutBound()
		if why == "stopped" {
			// Only a duplicate identity stops a core by itself.
			bound = max(bound, w.p.takeoverBound())
		}
		if late && w.now-w.faultsOver > bound {
			w.fail("%s exits (%s) %v after the faults stopped, later than the stop deadline allows", p, why, w.now-w.faultsOver)
		}
		w.settledAt = w.now
		// Once faults stop, Kubernetes restarts a container that exited,
		// at once: membership is stable but for this.
		restart()
	case why == "crash" && w.rng.IntN(2) == 0:
		d := w.between(0, 2*w.p.leaseDuration)
		if w.rng.IntN(2) == 0 {
			d = w.kubeletDelay() + w.between(0, time.Second) // restarted in place
		}
		w.after(d, func() {
			if !w.quiet {
				restart()
			}
		})
	}
	if w.quiet {
		w.keepOneMember()
	}
}

// keepOneMember starts a replica when none is left that is not leaving, as
// a Deployment would: liveness is about a ring that has members.
func (w *world) keepOneMember() {
	alive := w.alive()
	if slices.ContainsFunc(alive, func(p *proc) bool { return !p.leaving }) {
		return
	}
	for i := range w.p.identities {
		if !slices.ContainsFunc(alive, func(p *proc) bool { return p.id == w.identity(i) }) {
			w.start(i)
			return
		}
	}
}

func (p *proc) leave() {
	if !p.alive || p.leaving {
		return
	}
	p.leaving = true
	p.w.tracef("%s SIGTERM", p)
	if p.shell != nil {
		p.shell.Leave()
	} else {
		p.core.Leave()
	}
	p.step()
	// The shutdown timeout: a leave that cannot finish ends in a hard exit.
	p.w.after(30*time.Second, func() { p.exit("shutdown timeout") })
}

func (p *proc) reconnect() {
	if !p.alive || !p.cutOff {
		return
	}
	p.cutOff = false
	p.w.tracef("%s reconnected", p)
	p.watch(len(p.w.server.log))
	p.sendWrite()
}

// ---- controllers ----

func (p *proc) startDrain(q int) {
	w := p.w
	p.inflight.Add(q)
	p.stuck[q] = w.rng.IntN(100) < w.p.stuckPercent
	d := w.between(0, w.p.maxDrain)
	if p.stuck[q] {
		d = w.between(w.p.maxDrain, w.p.maxStuck)
	}
	p.finishDrainAfter(q, d)
}

func (p *proc) finishDrainAfter(q int, d time.Duration) {
	p.drainToken[q]++
	tok := p.drainToken[q]
	var done func()
	done = func() {
		if !p.alive || p.drainToken[q] != tok || !p.inflight.Has(q) || p.frozen(done) {
			return
		}
		p.inflight.Remove(q)
		p.disarmed.Remove(q)
		p.stuck[q] = false
		if p.w.runningBy[q] == p && !p.active.Has(q) {
			p.w.runningBy[q] = nil
		}
		if p.shell != nil {
			p.wakeRevokers()
			return
		}
		p.core.Drained(shard.NewPartitionSet(len(p.stuck), q))
		p.step()
	}
	p.w.after(d, done)
}

// ---- Lease client ----

func (p *proc) renewLoop() {
	if !p.alive || p.released || p.frozen(p.renewLoop) {
		return
	}
	p.sendWrite()
	p.w.after(p.w.p.renewPeriod, p.renewLoop)
}

// sendWrite writes the latest Record unless a write is in flight.
func (p *proc) sendWrite() {
	if !p.alive || p.rec == nil || p.released {
		return
	}
	if p.writing {
		p.dirty = true
		return
	}
	w := p.w
	p.writing, p.dirty = true, false
	rec, base, sent := p.rec.Clone(), p.baseRV, p.local()
	land := func() (uint64, bool) {
		rv, ok := w.server.put(p.id, rec, base, w.p.finalizers)
		if ok {
			w.tracef("%s write lands rv=%d gen=%d %s claim=%v", p, rv, rec.Generation, rec.State, rec.Claim)
			w.afterMutation(p.id)
		}
		return rv, ok
	}
	roll := w.rng.IntN(100)
	w.tracef("%s send write base=%d gen=%d roll=%d", p, base, rec.Generation, roll)
	if w.quiet {
		roll = 100 // the API server is healthy once faults stop
	}
	switch {
	case p.cutOff || roll < w.p.writeFailPct:
		w.after(w.latency(), func() { p.writeFailed() })
	case roll < w.p.writeFailPct+w.p.writeLostPct:
		// Timed out on the client; the server may still apply it, but
		// before the client gives up.
		if w.rng.IntN(2) == 0 {
			w.after(w.between(0, w.p.clientTimeout), func() { land() })
		}
		w.after(w.p.clientTimeout, func() { p.writeFailed() })
	default:
		w.after(w.latency(), func() {
			rv, ok := land()
			var respond func()
			respond = func() {
				if !p.alive || p.frozen(respond) {
					return
				}
				p.writing = false
				if !ok {
					p.writeConflict()
					return
				}
				p.baseRV = rv
				p.renewSucceeded(sent)
				p.step()
				if p.dirty {
					p.sendWrite()
				}
			}
			w.after(w.latency(), respond)
		})
	}
}

func (p *proc) writeFailed() {
	if !p.alive || p.frozen(p.writeFailed) {
		return
	}
	p.w.tracef("%s write failed", p)
	p.writing = false
	if p.dirty {
		p.w.after(p.w.between(100*time.Millisecond, 500*time.Millisecond), p.sendWrite)
	}
}

// writeConflict reads the own Lease: if this incarnation wrote it (a write
// that timed out landed), carry on from its version; if it is gone, create
// it; if another incarnation holds it, do not fight: the core will see it.
func (p *proc) writeConflict() {
	w := p.w
	w.tracef("%s write conflict", p)
	if p.cutOff {
		return
	}
	w.after(w.latency(), func() {
		cur := w.server.leases[p.id]
		var answer func()
		answer = func() {
			if !p.alive || p.frozen(answer) {
				return
			}
			// The rules membership.Member follows: its renewal's (JudgeOwnRead)
			// and, when that stops writing, its acquire's (JudgeAcquire).
			read, takeOver := p.ownLease(cur)
			switch handoff.JudgeOwnRead(p.inc, takeOver, read.OwnRead) {
			case handoff.OwnCreate:
				p.baseRV = 0
			case handoff.OwnAdopt:
				// Its own (a lost write that landed, or a relabel to
				// undo), or one the core allowed it to take over.
				p.baseRV = cur.rv
			default:
				if handoff.JudgeAcquire(simRing, p.id, p.inc, takeOver, read) != handoff.AcquireRestoreLabel {
					return
				}
				// Another incarnation's Lease relabelled out of the ring:
				// put it back, content unchanged, so that the core sees it
				// and waits it out.
				w.tracef("%s restores the ring label of its identity's Lease (rv %d)", p, cur.rv)
				if w.server.leases[p.id] == cur {
					w.server.write(p.id, &storedLease{rec: cur.rec.Clone(), uid: cur.uid, damaged: cur.damaged,
						finalized: cur.finalized, terminating: cur.terminating})
					w.afterMutation(p.id)
				}
				return
			}
			p.sendWrite()
		}
		w.after(w.latency(), answer)
	})
}

// simRing is the ring label of the simulated Leases: the world holds one
// ring, and a Lease relabelled out of it has none.
const simRing = "sim"

// ownLease is cur, this process's identity's Lease (nil: none), as the
// shell reads it for the handoff rules, with the version Ready.TakeOver
// last named ("" for none).
func (p *proc) ownLease(cur *storedLease) (read handoff.OwnLease, takeOver string) {
	if p.takeOverRV != 0 {
		takeOver = strconv.FormatUint(p.takeOverRV, 10)
	}
	if cur == nil {
		return read, takeOver
	}
	read = handoff.OwnLease{OwnRead: handoff.OwnRead{Found: true, Incarnation: cur.rec.Incarnation, Version: strconv.FormatUint(cur.rv, 10)},
		Ring: simRing, Holder: p.id}
	if cur.relabelled {
		read.Ring = ""
	}
	return read, takeOver
}

func (p *proc) deleteOwn(tries int) {
	w := p.w
	if p.writing {
		w.after(50*time.Millisecond, func() { p.deleteOwn(tries) })
		return
	}
	if p.cutOff || tries == 0 {
		p.exitAfterLeave()
		return
	}
	w.after(w.latency(), func() {
		var ok bool
		if w.p.finalizers && !p.unfinalized {
			// As membership.Member leaves: remove the finalizer over the last
			// version (which deletes a terminating Lease), then delete
			// the version that wrote.
			rv, _, done := w.server.unfinalize(p.id, p.baseRV)
			if ok = done; ok && w.server.leases[p.id] != nil {
				w.tracef("%s removes its Lease's finalizer rv=%d", p, rv)
				w.afterMutation(p.id)
				p.baseRV, p.unfinalized = rv, true
				w.after(w.latency(), func() { p.deleteOwn(tries) })
				return
			}
		} else {
			ok = w.server.del(p.id, p.baseRV)
		}
		if ok {
			w.tracef("%s Lease deleted", p)
			w.afterMutation(p.id)
		} else if cur := w.server.leases[p.id]; cur != nil && cur.rec.Incarnation == p.inc {
			p.baseRV, p.unfinalized = cur.rv, !cur.finalized
			w.after(w.latency(), func() { p.deleteOwn(tries - 1) })
			return
		}
		w.after(w.latency(), p.exitAfterLeave)
	})
}

// leaveComplete stops the Lease client and deletes the own Lease; the
// process exits after that.
func (p *proc) leaveComplete() {
	p.markLeft()
	p.w.tracef("%s leave complete: delete Lease", p)
	p.released = true
	p.deleteOwn(3)
}

// keptPlace ends a graceful leave that keeps the identity's place in the
// ring (handoff.Config.KeepPlaceOnLeave) once the core is done with it:
// the Lease stays, carrying the empty claim, for the next incarnation.
// It reports whether it did.
func (p *proc) keptPlace() bool {
	if !p.core.Done() || !p.leaving || !p.core.Returning() || p.released {
		return false
	}
	p.markLeft()
	w := p.w
	w.keptPlaces++
	w.tracef("%s leave complete: Lease left for the next incarnation", p)
	p.released = true
	p.exitAfterLeave()
	return true
}

// markLeft records p's incarnation as one that left gracefully, whichever
// way its Lease ends (deleted or kept for the next incarnation); peers'
// tombstones of it are counted by countLeaveTombstones.
func (p *proc) markLeft() {
	if p.w.leftIncs == nil {
		p.w.leftIncs = map[string]bool{}
	}
	p.w.leftIncs[p.inc] = true
}

func (p *proc) exitAfterLeave() {
	if !p.running().IsEmpty() {
		p.w.fail("%s leaves while running %v", p, p.running())
	}
	p.exit("left")
}

func (p *proc) confirm(ref handoff.LeaseRef) {
	p.readLease(ref, func(cur *storedLease, failed bool) {
		switch {
		case failed:
			p.core.ConfirmFailed(ref.Identity)
		case cur == nil:
			p.core.Confirmed(ref.Identity, "", false)
		default:
			p.core.Confirmed(ref.Identity, strconv.FormatUint(cur.rv, 10), true)
		}
		p.step()
	})
}

// tombstone reports whether p's core holds identity's Lease as a tombstone
// (gone from its view, its claim still in force): a read that finds it
// still gone voids it. A Lease still in p's view that the read finds gone
// becomes a tombstone instead.
func (p *proc) tombstone(identity string) bool {
	return slices.ContainsFunc(p.hooks().Tombstones(), func(o handoffhook.Tombstone) bool { return o.Identity == identity })
}

// readLease reads ref's Lease directly, as Confirm does, and calls answer
// with it (nil: gone) when the response arrives, or with failed after the
// client timeout when cut off. Before the read lands it checks that the
// requester may void what it will void.
func (p *proc) readLease(ref handoff.LeaseRef, answer func(cur *storedLease, failed bool)) {
	w := p.w
	if p.cutOff {
		w.after(w.p.clientTimeout, func() {
			if p.alive {
				answer(nil, true)
			}
		})
		return
	}
	want, _ := strconv.ParseUint(ref.Version, 10, 64)
	w.after(w.latency(), func() {
		cur := w.server.leases[ref.Identity]
		if cur != nil && cur.relabelled {
			cur = nil // not a Lease of the ring any more: the shell reads it as gone
		}
		if cur == nil && ref.Identity != p.id && p.tombstone(ref.Identity) {
			// The requester will void a tombstone: nothing of that
			// identity may still run. (A Lease that was in its view
			// becomes a tombstone on this answer.)
			for _, o := range w.procs {
				if o.alive && o.id == ref.Identity && !o.armed().IsEmpty() && !o.paused() {
					w.fail("%s confirms %s gone while %s still runs %v (fenced %v ago)", p, ref.Identity, o, o.armed(), w.now-o.fenceAt)
				}
			}
		}
		if cur != nil && cur.rv == want {
			// The requester will void these claims: their holder must have
			// stopped everything already.
			for _, o := range w.procs {
				if o.alive && o.id == ref.Identity && o.inc == cur.rec.Incarnation && !o.armed().IsEmpty() && !o.paused() {
					w.fail("%s confirms %s expired (rv %d) while it still runs %v (fenced %v ago)", p, o, want, o.armed(), w.now-o.fenceAt)
				}
			}
		}
		var respond func()
		respond = func() {
			if !p.alive || p.frozen(respond) {
				return
			}
			w.tracef("%s confirmed %s@%s: %v", p, ref.Identity, ref.Version, cur != nil && cur.rv == want || cur == nil)
			answer(cur, false)
		}
		w.after(w.latency(), respond)
	})
}

func (p *proc) garbageCollect(ref handoff.LeaseRef) {
	w := p.w
	if p.cutOff {
		return
	}
	rv, _ := strconv.ParseUint(ref.Version, 10, 64)
	w.after(w.latency(), func() { p.collect(ref.Identity, rv) })
}

// ---- informer ----

// watch schedules delivery of the log up to upTo after this process's watch
// delay. Deliveries are prefixes, so a late one never reorders anything.
func (p *proc) watch(upTo int) {
	w := p.w
	d := w.between(time.Millisecond, w.p.maxWatchDelay)
	if w.now < p.slowUntil {
		d = w.between(time.Millisecond, p.slowMax)
	}
	w.after(d, func() { p.deliver(upTo) })
}

// deliver advances the informer to the log prefix upTo and feeds the core.
// A cut-off process's watch stalls.
func (p *proc) deliver(upTo int) {
	if !p.alive || p.cutOff || p.w.now < p.stallUntil || upTo < p.cursor || p.frozen(func() { p.deliver(upTo) }) {
		return
	}
	log := p.w.server.log
	for _, e := range log[p.cursor:upTo] {
		// The informer's delete event carries the last state: the shell
		// keeps reporting it as gone (membership.Member does).
		next := e.lease
		if next == nil {
			next = e.gone
		}
		// A later state of an object supersedes its departure; a new
		// object leaves the departure of the previous one reported.
		ds := slices.DeleteFunc(p.departed[e.identity], func(d departure) bool { return d.l.uid == next.uid })
		if old := p.cache[e.identity]; old != nil && old.uid != next.uid && (old.relabelled || old.deleted) {
			ds = append(ds, departure{l: old, at: p.w.now})
		}
		if len(ds) == 0 {
			delete(p.departed, e.identity)
		} else {
			p.departed[e.identity] = ds
		}
		p.cache[e.identity] = next
	}
	p.cursor = upTo
	p.observeCache()
}

// relist replaces the informer's content with a fresh list (the watch's
// resourceVersion expired): Leases that departed since are simply absent,
// their last state unknown.
func (p *proc) relist() {
	w := p.w
	if !p.alive || p.cutOff || w.now < p.stallUntil || p.paused() {
		return
	}
	w.tracef("%s relists", p)
	p.cache = map[string]*storedLease{}
	p.departed = map[string][]departure{}
	for id, l := range w.server.leases {
		if !l.relabelled {
			p.cache[id] = l
		}
	}
	p.cursor = len(w.server.log)
	p.observeCache()
}

// observeCache feeds the informer's content to the core and steps.
func (p *proc) observeCache() {
	ids := make([]string, 0, len(p.cache))
	for id := range p.cache {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	p.observed = p.observed[:0]
	for _, id := range ids {
		// Earlier objects' departures first, the latest object last.
		ds := slices.DeleteFunc(p.departed[id], func(d departure) bool { return p.w.now-d.at > 4*p.w.p.leaseDuration })
		p.departed[id] = ds
		for _, d := range ds {
			p.observed = append(p.observed, observedOf(d.l))
		}
		p.observed = append(p.observed, observedOf(p.cache[id]))
	}
	first := !p.listed
	p.listed = true
	if p.shell == nil {
		p.core.Observe(p.local(), p.observed)
		p.countLeaveTombstones()
	} else {
		p.splitObserved()
	}
	if first {
		p.firstObserved = p.local()
		p.firstUnfinalized = slices.ContainsFunc(p.observed, func(o handoff.Observed) bool { return !o.Gone && !o.Finalized })
		if p.w.p.finalizers {
			p.joinScan() // an older kshard (no finalizers) has none: it never skips the wait
		}
	}
	p.checkScan()
	p.step()
}

// departure is an earlier Lease object's last state, as the informer's
// delete event carried it, and when the informer delivered its successor.
type departure struct {
	l  *storedLease
	at time.Duration
}

// observedOf is what the shell reports of l.
func observedOf(l *storedLease) handoff.Observed {
	o := handoff.Observed{Record: l.rec, Version: strconv.FormatUint(l.rv, 10), UID: strconv.FormatUint(l.uid, 10),
		Finalized: l.finalized, Terminating: l.terminating}
	// Out of the label selector (the watch's delete event) or deleted:
	// reported as gone, with its last state.
	o.Gone = l.relabelled || l.deleted
	if l.damaged {
		o.Problem = "damaged by hand"
	}
	return o
}

// countLeaveTombstones counts peers whose Lease this process holds as a
// tombstone after a graceful leave of theirs (see world.leaveTombstones).
func (p *proc) countLeaveTombstones() {
	w := p.w
	for _, peer := range p.hooks().Tombstones() {
		// A void record (the departure of an empty claim, kept while
		// reported) waits on nothing: Tombstones leaves it out.
		if !w.leftIncs[peer.Incarnation] {
			continue
		}
		key := p.inc + "/" + peer.Identity + "/" + peer.Incarnation
		if w.tombstoned == nil {
			w.tombstoned = map[string]bool{}
		}
		if !w.tombstoned[key] {
			w.tombstoned[key] = true
			w.leaveTombstones++
		}
	}
}
