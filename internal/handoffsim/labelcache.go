package handoffsim

import (
	"fmt"
	"slices"
	"time"

	"github.com/kshard/kshard/shard"
)

// labelCache is a process's cache of the kind sharded by labels, modelled
// on shard/cache's Labelled:
//
//   - a label segment per held partition q ("label in (q)"), listed when q
//     is gained (partCache.list: slow now and then, failing and retried
//     while the faults last) and dropped when q is released;
//   - an unlabelled view ("label notin (every partition)") that stores the
//     objects of the partitions it keeps and drops the others, marking
//     their partitions dirty; gaining a partition the newest view has
//     dropped objects of starts a replacement, which LISTs (slow or failing
//     like any LIST) and, once listed, supersedes the views before it;
//   - the pending objects: an object that leaves a view while no other
//     holds it stays served until a view adds it again; a live read after
//     ConfirmAfter, and every 5 s after, refreshes it (objects are never
//     deleted in this model) and offers it to the labeller;
//   - the labeller: it writes an object's own partition's label when that
//     partition, or the one the label names, is active here (SetActive),
//     after a delay that is now and then long (a labelling step that is
//     slow), and retries failed writes with the work queue's exponential
//     backoff.
//
// The label segments share one watch and the unlabelled views another,
// each with its own lag, so an object that moves between views can reach
// one before the other.
//
// The kind's views start (Labelled.Run) in either order against the ring's
// first Hold, as a replica's controllers and its ring start concurrently:
// before it, the unlabelled view keeps the set the cache held then, of the
// size heldBeforeFirstHold gives (labelsizing.go).
type labelCache struct {
	// held is the kind's held set (Labelled.held): the cache's held set
	// when the kind was created, then every Hold's.
	held shard.PartitionSet
	// holds counts the Hold calls that reached the kind: 0 before the
	// ring's first update.
	holds int
	// running: the views have started (Labelled.Run); afterHold: they
	// start only once the ring's first Hold has reached the kind.
	running, afterHold bool

	segs []*labelSeg // per partition: its label segment once listed, nil while not held or listing
	// labelPos and unlPos: the log entries the two watches have delivered.
	labelPos, unlPos int
	// A slow-watch fault of either watch: lags up to labelSlow (unlSlow)
	// until labelSlowUntil (unlSlowUntil).
	labelSlowUntil, unlSlowUntil, labelSlow, unlSlow time.Duration
	// labelStalled, unlStalled: a delivery waits for the end of a cut-off.
	labelStalled, unlStalled bool
	views                    []*unlView // oldest first; the newest listed one speaks
	pending                  map[int]*pendingObject
	pendingGen               int
	work                     map[int]labelWork // the labeller's queue, by object
	failures                 map[int]int       // failed writes in a row, by object (its backoff)
	active                   shard.PartitionSet
}

// labelSeg is a listed label segment: the objects its LIST returned and
// its watch delivered since (log index from on). pinned: it listed at the
// speaking unlabelled view's position (FixPinnedSegments).
type labelSeg struct {
	from   int
	store  objStore
	pinned bool
}

// unlView is one unlabelled view.
type unlView struct {
	listed bool
	from   int
	// keeps: the partitions whose unlabelled objects it stores; dirty:
	// partitions of which it has dropped an object.
	keeps, dirty shard.PartitionSet
	store        objStore
}

// pendingObject is the last known state of an object that left a view
// and is in no other.
type pendingObject struct{ label, rv, gen int }

// labelWork is where an object is in a process's labeller.
type labelWork int

const (
	idle          labelWork = iota
	queued                  // waiting for a worker (or its retry backoff)
	inFlight                // a label write is on the wire
	inFlightAgain           // and it was offered again meanwhile: look again once it returns
)

// objStore holds, per object id, the resourceVersion of the state a view
// holds (0: none).
type objStore []int

func (s objStore) has(id int) bool { return id < len(s) && s[id] != 0 }

func (s *objStore) put(id, rv int) {
	for len(*s) <= id {
		*s = append(*s, 0)
	}
	(*s)[id] = rv
}

func (s objStore) del(id int) {
	if id < len(s) {
		s[id] = 0
	}
}

func (s objStore) ids() []int {
	var out []int
	for id, rv := range s {
		if rv != 0 {
			out = append(out, id)
		}
	}
	return out
}

// Timing of the model's cache, after shard/cache's defaults.
const (
	confirmAfter    = 2 * time.Second // DefaultConfirmAfter
	confirmReread   = 5 * time.Second // confirmReread
	maxLabelBackoff = time.Minute     // the labeller's work queue: 100 ms doubling, at most a minute
)

// startLabelCache gives a starting process its cache of the labelled
// kind: no segments yet and no views until the kind's views start
// (runLabels), which draws whether that is before the ring's first Hold
// (at once, or within a second: the kind created as the manager starts,
// its cache running before the ring's first update) or after it (within
// half a second of it). Run starts the unlabelled view with the
// partitions held so far.
func (p *proc) startLabelCache() {
	w, lw := p.w, p.w.lab
	if lw == nil {
		return
	}
	n := lw.partitions
	lc := &labelCache{segs: make([]*labelSeg, n), labelPos: len(lw.log), unlPos: len(lw.log),
		pending: map[int]*pendingObject{}, work: map[int]labelWork{}, failures: map[int]int{}, active: shard.NewPartitionSet(n),
		held: shard.NewPartitionSet(heldBeforeFirstHold(n))}
	p.pcache.labels = lc
	switch w.rng.IntN(3) {
	case 0:
		p.runLabels()
	case 1:
		w.after(w.between(0, time.Second), p.runLabels)
	default:
		lc.afterHold = true
	}
}

// runLabels starts the kind's views (Labelled.Run): the unlabelled view
// lists, keeping the partitions held now.
func (p *proc) runLabels() {
	lw, lc := p.w.lab, p.pcache.labels
	if !p.alive || lc.running || p.frozen(p.runLabels) {
		return
	}
	lc.running = true
	if lc.holds == 0 {
		lw.stats.EarlyStarts++
		p.w.tracef("%s starts its views before the ring's first Hold: held %v (size %d)", p, lc.held, lc.held.Size())
	} else {
		p.w.tracef("%s starts its views: held %v", p, lc.held)
	}
	p.startUnlabelled(lc.held.Clone())
	// The label segments of the partitions held so far list now
	// (Segmented.Run).
	for q := range lc.held.All() {
		p.pcache.token[q]++
		p.list(q, p.pcache.token[q])
	}
}

// ---- holding partitions ----

// holdLabels follows a Hold of set (each one the cache is given, an
// unchanged set too): released partitions' segments and pending objects go
// at once; once the views run, they keep the gained partitions they have
// dropped nothing of, and a replacement view is listed when the newest has
// dropped objects of one (Labelled.Hold). Views that start after the
// ring's first Hold start then.
func (p *proc) holdLabels(set shard.PartitionSet) {
	lc := p.pcache.labels
	gained, released := set.Difference(lc.held), lc.held.Difference(set)
	lc.held = set.Clone()
	if lc.holds++; lc.holds == 1 && lc.afterHold {
		p.w.after(p.w.between(0, 500*time.Millisecond), p.runLabels)
	}
	var gone []int
	for q := range released.All() {
		if s := lc.segs[q]; s != nil {
			gone = append(gone, s.store.ids()...)
			lc.segs[q] = nil
		}
	}
	for _, id := range sortedKeys(lc.pending) {
		if !lc.held.Has(p.w.lab.objs[id].part) {
			delete(lc.pending, id)
		}
	}
	if lc.running && !gained.IsEmpty() {
		for _, v := range lc.views {
			v.keeps = v.keeps.Union(gained.Difference(v.dirty))
		}
		if newest := lc.views[len(lc.views)-1]; !gained.Intersect(newest.dirty).IsEmpty() {
			p.w.lab.stats.Replacements++
			p.w.tracef("%s gains %v, of which its unlabelled view dropped objects: a replacement lists", p, gained.Intersect(newest.dirty))
			p.startUnlabelled(lc.held.Clone())
		}
	}
	p.checkObjects(gone, "as its segment of the label's partition is released")
}

// segmentListed fills q's new label segment with what its LIST returned:
// the objects labelled q now, or, with FixPinnedSegments, at the speaking
// unlabelled view's position if that view keeps q (else the segment waits
// for a view that does: listPinned).
func (p *proc) segmentListed(q int) {
	lw, lc := p.w.lab, p.pcache.labels
	lc.segs[q] = &labelSeg{}
	at, pinned := len(lw.log), false
	if lw.fixes&FixPinnedSegments != 0 {
		at, pinned = p.pinPosition(q)
	}
	p.snapshotSeg(q, at, pinned)
}

// pinPosition is the log position a label segment of q lists at with
// FixPinnedSegments: the speaking unlabelled view's, if it has listed and
// keeps q (pinned), else the end of the log.
func (p *proc) pinPosition(q int) (at int, pinned bool) {
	if v := p.speaker(); v != nil && v.listed && v.keeps.Has(q) {
		return max(v.from, p.pcache.labels.unlPos), true
	}
	return len(p.w.lab.log), false
}

// snapshotSeg replaces q's label segment's store with the objects labelled
// q after the first at log entries, and has its watch catch up with the
// other segments' watch. Objects it no longer holds leave it as a relist's
// vanished objects do; new ones arrive.
func (p *proc) snapshotSeg(q, at int, pinned bool) []int {
	lw, lc := p.w.lab, p.pcache.labels
	s := lc.segs[q]
	old := s.store
	s.store, s.from, s.pinned = nil, at, pinned
	for id := range lw.objs {
		if lw.labelAt(id, at) == q {
			s.store.put(id, lw.rv(id, at))
		}
	}
	var left []int
	for _, id := range old.ids() {
		if !s.store.has(id) {
			p.leavingView(nil, id, q, old[id])
			left = append(left, id)
		}
	}
	for _, id := range s.store.ids() {
		if !old.has(id) && p.serves(nil, id) {
			p.arrived(id)
		}
		// A LIST again delivers every object it returns (an update for
		// those the store held), each offered to the labeller.
		p.consider(id)
	}
	for i := at; i < lc.labelPos; i++ {
		if e := lw.log[i]; (e.from == q || e.to == q) && p.segEvent(q, i, e) {
			left = append(left, e.obj)
		}
	}
	return left
}

// listPinned lists q's label segment again at the speaking unlabelled
// view's position (FixPinnedSegments), once a view keeping q has listed;
// a LIST like any, slow now and then, failing and retried while the faults
// last.
func (p *proc) listPinned(q int, tok uint64) {
	w := p.w
	d, _, fails := w.drawListTime()
	var done func()
	done = func() {
		if !p.alive || p.pcache.token[q] != tok || p.pcache.labels.segs[q] == nil || p.frozen(done) {
			return
		}
		if fails {
			w.after(w.between(100*time.Millisecond, maxListRetry), func() { p.listPinned(q, tok) })
			return
		}
		at, pinned := p.pinPosition(q)
		if !pinned {
			return // the next view to list tries again
		}
		w.tracef("%s label segment %d lists at the unlabelled view's position %d", p, q, at)
		if !p.checkObjects(p.snapshotSeg(q, at, true), "after its label segment listed again") {
			return
		}
		p.cacheChanged()
	}
	w.after(d, done)
}

// ---- the unlabelled views ----

// startUnlabelled lists a new unlabelled view keeping keeps; a replacement
// that has not listed yet is superseded at once.
func (p *proc) startUnlabelled(keeps shard.PartitionSet) {
	lc := p.pcache.labels
	p.w.lab.stats.UnlabelledLists++
	lc.views = slices.DeleteFunc(lc.views, func(o *unlView) bool { return !o.listed })
	v := &unlView{keeps: keeps.Clone(), dirty: shard.NewPartitionSet(keeps.Size())}
	lc.views = append(lc.views, v)
	p.listUnlabelled(v)
}

// listUnlabelled runs view v's LIST, retrying while it fails.
func (p *proc) listUnlabelled(v *unlView) {
	w := p.w
	d, _, fails := w.drawListTime()
	var done func()
	done = func() {
		if !p.alive || !slices.Contains(p.pcache.labels.views, v) || p.frozen(done) {
			return
		}
		if fails {
			w.lab.stats.FailedUnlabelledLists++
			w.tracef("%s LIST of the unlabelled objects fails; retrying", p)
			w.after(w.between(100*time.Millisecond, maxListRetry), func() { p.listUnlabelled(v) })
			return
		}
		p.unlabelledListed(v)
	}
	w.after(d, done)
}

// unlabelledListed fills v with what its LIST returned, filtered to its
// partitions; v then speaks and the views before it stop (their stores go
// with them).
func (p *proc) unlabelledListed(v *unlView) {
	lw, lc := p.w.lab, p.pcache.labels
	p.fillUnlabelled(v)
	if old := p.speaker(); lw.fixes&FixReplacement != 0 && old != nil && old.listed {
		// While the old view still speaks: what it holds and v lacks
		// leaves it.
		for _, id := range old.store.ids() {
			if !v.store.has(id) {
				p.leavingView(old, id, unlabelled, old.store[id])
			}
		}
	}
	v.listed = true
	if lc.holds == 0 {
		lw.stats.ListedBeforeHold++
	}
	var dropped []int
	for _, o := range lc.views {
		if o != v {
			dropped = append(dropped, o.store.ids()...)
		}
	}
	lc.views = []*unlView{v}
	p.w.tracef("%s unlabelled view listed: keeps %v, %d objects; dirty %v", p, v.keeps, len(v.store.ids()), v.dirty)
	for _, id := range v.store.ids() {
		p.consider(id)
	}
	if !p.checkObjects(dropped, "as a new unlabelled view replaces the one that held it") {
		return
	}
	if !lc.active.Intersect(v.keeps).IsEmpty() {
		for _, id := range p.objectsOf(lc.active) {
			p.consider(id)
		}
	}
	if lw.fixes&FixPinnedSegments != 0 {
		for q, s := range lc.segs {
			if s != nil && !s.pinned && v.keeps.Has(q) {
				lw.stats.PinnedLists++
				p.listPinned(q, p.pcache.token[q])
			}
		}
	}
	p.cacheChanged()
}

// fillUnlabelled sets view v's store to what a LIST of the unlabelled
// objects returns now, filtered to its partitions; the partitions of the
// objects it drops become dirty.
func (p *proc) fillUnlabelled(v *unlView) {
	lw := p.w.lab
	v.store, v.from = nil, len(lw.log)
	for id, o := range lw.objs {
		switch {
		case o.label != unlabelled:
		case v.keeps.Has(o.part):
			v.store.put(id, lw.rv(id, v.from))
		default:
			p.markDirty(v, o.part)
		}
	}
}

// speaker is the unlabelled view that is read: the newest listed one, or
// the newest.
func (p *proc) speaker() *unlView {
	views := p.pcache.labels.views
	for i := len(views) - 1; i >= 0; i-- {
		if views[i].listed {
			return views[i]
		}
	}
	if len(views) == 0 {
		return nil
	}
	return views[len(views)-1]
}

// ---- the watches ----

// watchLabels delivers the log up to upTo to the label segments and to
// the unlabelled views, each after its watch's lag.
func (p *proc) watchLabels(upTo int) {
	w, lc := p.w, p.pcache.labels
	lag := func(slowUntil, slow time.Duration) time.Duration {
		if !w.quiet && w.now < slowUntil {
			return w.between(time.Millisecond, slow)
		}
		return w.between(time.Millisecond, w.p.maxWatchDelay)
	}
	w.after(lag(lc.labelSlowUntil, lc.labelSlow), func() { p.deliverLabelled(upTo) })
	w.after(lag(lc.unlSlowUntil, lc.unlSlow), func() { p.deliverUnlabelled(upTo) })
}

// stalled defers a delivery while the process is cut off from the API
// server: one retry per watch polls for the reconnection and then delivers
// the whole log.
func (p *proc) stalled(flag *bool, deliver func(upTo int)) bool {
	if !p.cutOff {
		return false
	}
	if !*flag {
		*flag = true
		var poll func()
		poll = func() {
			switch {
			case !p.alive:
			case p.cutOff:
				p.w.after(p.w.between(100*time.Millisecond, 500*time.Millisecond), poll)
			default:
				*flag = false
				deliver(len(p.w.lab.log))
			}
		}
		p.w.after(p.w.between(100*time.Millisecond, 500*time.Millisecond), poll)
	}
	return true
}

// deliverLabelled advances the label segments' watch to upTo: an object
// whose label changed leaves the segment of the old one (DELETED, its last
// state) and enters that of the new one.
func (p *proc) deliverLabelled(upTo int) {
	lw, lc := p.w.lab, p.pcache.labels
	if !p.alive || upTo <= lc.labelPos || p.frozen(func() { p.deliverLabelled(upTo) }) || p.stalled(&lc.labelStalled, p.deliverLabelled) {
		return
	}
	var left []int
	for i := lc.labelPos; i < upTo; i++ {
		e := lw.log[i]
		if p.segEvent(e.from, i, e) {
			left = append(left, e.obj)
		}
		p.segEvent(e.to, i, e)
	}
	lc.labelPos = upTo
	p.checkObjects(left, "after its label segment's watch delivered the label change")
}

// segEvent delivers log entry i, e, to partition q's label segment if it is
// listed and its watch delivers i: the object leaves it (DELETED, its last
// state; segEvent reports that) or enters it. q may be neither label of e,
// or not a partition: nothing happens.
func (p *proc) segEvent(q, i int, e labelEvent) (left bool) {
	if q < 0 {
		return false
	}
	s := p.pcache.labels.segs[q]
	switch {
	case s == nil || i < s.from:
	case e.from == q && s.store.has(e.obj):
		p.leavingView(nil, e.obj, q, s.store[e.obj])
		s.store.del(e.obj)
		return true
	case e.to == q:
		p.enter(nil, &s.store, e.obj, i+1)
	}
	return false
}

// enter plays an object arriving at resourceVersion rv in a view's store (v
// nil: a label segment's): the process serves it if that view now does.
func (p *proc) enter(v *unlView, store *objStore, obj, rv int) {
	store.put(obj, rv)
	if p.serves(v, obj) {
		p.arrived(obj)
	}
	p.consider(obj)
}

// deliverUnlabelled advances the unlabelled views' watch to upTo: an object
// that got a label leaves every view holding it (DELETED); one created or
// left without a label enters every view keeping its partition and marks
// the others dirty.
func (p *proc) deliverUnlabelled(upTo int) {
	lw, lc := p.w.lab, p.pcache.labels
	if !p.alive || upTo <= lc.unlPos || p.frozen(func() { p.deliverUnlabelled(upTo) }) || p.stalled(&lc.unlStalled, p.deliverUnlabelled) {
		return
	}
	var left []int
	for i := lc.unlPos; i < upTo; i++ {
		e := lw.log[i]
		part := lw.objs[e.obj].part
		for _, v := range lc.views {
			if !v.listed || i < v.from {
				continue
			}
			switch {
			case e.from == unlabelled && v.store.has(e.obj):
				p.leavingView(v, e.obj, unlabelled, v.store[e.obj])
				v.store.del(e.obj)
				left = append(left, e.obj)
			case e.to != unlabelled:
			case v.keeps.Has(part):
				p.enter(v, &v.store, e.obj, i+1)
			default:
				p.markDirty(v, part)
			}
		}
	}
	lc.unlPos = upTo
	p.checkObjects(left, "after its unlabelled view's watch delivered the label change")
}

// relistView plays a watch that expired: one of the process's listed
// views (a label segment or the speaking unlabelled view) lists again. Its
// objects that the new LIST lacks leave it, as the informer's relist
// reports them (reportVanished).
func (p *proc) relistView() {
	w, lw, lc := p.w, p.w.lab, p.pcache.labels
	var segs []int
	for q, s := range lc.segs {
		if s != nil {
			segs = append(segs, q)
		}
	}
	v := p.speaker()
	if v != nil && !v.listed {
		v = nil
	}
	n := len(segs) + btoi(v != nil)
	if n == 0 {
		return
	}
	lw.stats.Relists++
	var left []int
	if k := w.rng.IntN(n); k < len(segs) {
		q := segs[k]
		w.tracef("%s label segment %d relists", p, q)
		left = p.snapshotSeg(q, len(lw.log), lc.segs[q].pinned)
	} else {
		w.tracef("%s unlabelled view relists", p)
		old := v.store
		p.fillUnlabelled(v)
		for _, id := range old.ids() {
			if !v.store.has(id) {
				p.leavingView(v, id, unlabelled, old[id])
				left = append(left, id)
			}
		}
		for _, id := range v.store.ids() {
			if !old.has(id) && p.serves(v, id) {
				p.arrived(id)
			}
			p.consider(id) // as a label segment's relist: every object
		}
	}
	p.checkObjects(left, "after one of its views listed again")
}

// ---- merging the views ----

// serves reports whether an event of view v (nil: a label segment) about
// object id is passed on: its partition is held, and v is the speaking
// unlabelled view and keeps it.
func (p *proc) serves(v *unlView, id int) bool {
	part := p.w.lab.objs[id].part
	if !p.pcache.hold.Has(part) {
		return false
	}
	return v == nil || (p.speaker() == v && v.keeps.Has(part))
}

// arrived: a view holds object id again; it is no longer pending.
func (p *proc) arrived(id int) { delete(p.pcache.labels.pending, id) }

// leavingView is told of object id, in its last state (label, rv), before view
// v (nil: a label segment) drops it. Unless another view holds it, it
// becomes pending: still served until a view adds it again.
func (p *proc) leavingView(v *unlView, id, label, rv int) {
	w, lw, lc := p.w, p.w.lab, p.pcache.labels
	part := lw.objs[id].part
	if !p.pcache.hold.Has(part) || (v != nil && p.speaker() != v) || lw.dropOnLeave {
		return
	}
	if p.inOtherView(id, v) {
		return
	}
	if pe := lc.pending[id]; pe != nil {
		pe.label, pe.rv = label, rv
		return
	}
	lc.pendingGen++
	gen := lc.pendingGen
	lc.pending[id] = &pendingObject{label: label, rv: rv, gen: gen}
	lw.stats.Pending++
	w.tracef("%s object %d (partition %d) left a view holding none: pending", p, id, part)
	w.after(confirmAfter, func() { p.confirmPending(id, gen) })
}

// inOtherView reports whether a view other than from holds object id
// (Labelled.otherView: a label segment's departure is checked against the
// speaking unlabelled view only).
func (p *proc) inOtherView(id int, from *unlView) bool {
	if from != nil {
		for _, s := range p.pcache.labels.segs {
			if s != nil && s.store.has(id) {
				return true
			}
		}
	}
	v := p.speaker()
	return v != nil && v != from && v.store.has(id)
}

// confirmPending reads pending object id from the API server: it exists
// (objects are never deleted here), so it stays served in its live state,
// is offered to the labeller, and is read again in 5 s. A failed read is
// retried then too.
func (p *proc) confirmPending(id, gen int) {
	w, lw, lc := p.w, p.w.lab, p.pcache.labels
	still := func() bool { pe := lc.pending[id]; return p.alive && pe != nil && pe.gen == gen }
	if !still() || p.frozen(func() { p.confirmPending(id, gen) }) {
		return
	}
	lw.stats.ConfirmReads++
	reread := func() { w.after(confirmReread, func() { p.confirmPending(id, gen) }) }
	if p.cutOff || !w.quiet && w.rng.IntN(100) < 10 {
		reread()
		return
	}
	w.after(w.latency(), func() {
		label, rv := lw.objs[id].label, lw.rv(id, len(lw.log))
		var answer func()
		answer = func() {
			if !still() || p.frozen(answer) {
				return
			}
			pe := lc.pending[id]
			pe.label, pe.rv = label, rv
			w.tracef("%s pending object %d still exists (label %s)", p, id, labelName(label))
			reread()
			p.consider(id)
		}
		w.after(w.latency(), answer)
	})
}

// findObject returns the newest state of object id that the process's
// views or pending objects hold, whatever its partition (Labelled.find).
func (p *proc) findObject(id int) (label, rv int, ok bool) {
	lc := p.pcache.labels
	for q, s := range lc.segs {
		if s != nil && s.store.has(id) && s.store[id] > rv {
			label, rv, ok = q, s.store[id], true
		}
	}
	if v := p.speaker(); v != nil && v.store.has(id) && v.store[id] > rv {
		label, rv, ok = unlabelled, v.store[id], true
	}
	if pe := lc.pending[id]; pe != nil && (!ok || pe.rv > rv) {
		label, rv, ok = pe.label, pe.rv, true
	}
	return label, rv, ok
}

// seesObject reports whether the process's cache serves object id: its
// partition is held, and a label segment, the speaking unlabelled view or
// the pending objects hold it (Labelled.GetByKey).
func (p *proc) seesObject(id int) bool {
	if !p.pcache.hold.Has(p.w.lab.objs[id].part) {
		return false
	}
	_, _, ok := p.findObject(id)
	return ok
}

// objectsOf returns the objects of parts that the process's cache serves,
// in id order (Labelled.views).
func (p *proc) objectsOf(parts shard.PartitionSet) []int {
	var out []int
	for q := range parts.All() {
		for _, id := range p.w.lab.byPart[q] {
			if _, _, ok := p.findObject(id); ok {
				out = append(out, id)
			}
		}
	}
	slices.Sort(out)
	return out
}

// labelSynced is what the cache reports synced: the held partitions whose
// label segment has listed, and which the speaking unlabelled view has
// listed and keeps (Labelled.SyncedPartitions); with FixPinnedSegments,
// only once the segment has listed at that view's position. The mutation
// of Options.LabelsSyncIgnoresUnlabelled reports a partition synced once
// its label segment has listed, whatever the unlabelled view.
func (p *proc) labelSynced() shard.PartitionSet {
	c, lw := &p.pcache, p.w.lab
	s := c.synced.Intersect(c.hold)
	if lw.ignoreUnlabelled {
		return s
	}
	if lw.fixes&FixPinnedSegments != 0 {
		for q := range c.synced.Intersect(c.hold).All() {
			if seg := c.labels.segs[q]; seg == nil || !seg.pinned {
				s.Remove(q)
			}
		}
	}
	if v := p.speaker(); v != nil && v.listed {
		return s.Intersect(v.keeps)
	}
	return shard.NewPartitionSet(c.hold.Size())
}

// ---- the labeller ----

// SetActive tells the cache which partitions are active on the process
// (the coordinator calls it after every applied Ready; the built-in shell
// after every step): the unlabelled and mislabelled objects of the gained
// ones are offered to the labeller.
func (p *proc) SetActive(set shard.PartitionSet) {
	lc := p.pcache.labels
	if lc == nil || !p.alive {
		return
	}
	gained := set.Difference(lc.active)
	lc.active = set.Clone()
	ids := p.objectsOf(gained)
	if p.w.lab.fixes&FixStrays != 0 {
		for q := range gained.All() {
			if s := lc.segs[q]; s != nil {
				ids = append(ids, s.store.ids()...)
			}
		}
		slices.Sort(ids)
		ids = slices.Compact(ids)
	}
	for _, id := range ids {
		p.consider(id)
	}
}

// wantsLabel reports whether the process should write object id's label
// now: as its views show it, the object lacks its partition's label, and
// that partition, or the one its label names, is active here.
func (p *proc) wantsLabel(id int) bool {
	label, _, ok := p.findObject(id)
	part := p.w.lab.objs[id].part
	if !ok || label == part {
		return false
	}
	lc := p.pcache.labels
	return lc.active.Has(part) || label >= 0 && lc.active.Has(label)
}

// consider queues object id for labelling if it needs it here (once: an
// object queued or in flight is not queued twice).
func (p *proc) consider(id int) {
	lc := p.pcache.labels
	if !p.wantsLabel(id) {
		return
	}
	switch lc.work[id] {
	case idle:
		lc.work[id] = queued
		p.w.after(p.labelDelay(), func() { p.labelStep(id) })
	case inFlight:
		lc.work[id] = inFlightAgain
	}
}

// labelDelay is how long a queued label write waits for a worker: a few
// milliseconds, or, one time in ten, 1-5 s (the QPS bound over a burst of
// objects, or a slow API server): the slow labelling step.
func (p *proc) labelDelay() time.Duration {
	w := p.w
	if w.rng.IntN(10) == 0 {
		w.lab.stats.SlowPatches++
		return w.between(time.Second, 5*time.Second)
	}
	return w.between(time.Millisecond, 20*time.Millisecond)
}

// labelStep writes object id's label if it still needs it: a merge patch
// without precondition, so racing writers agree. While the faults last, a
// write may fail, or time out and land anyway.
func (p *proc) labelStep(id int) {
	w, lw, lc := p.w, p.w.lab, p.pcache.labels
	if !p.alive || lc.work[id] != queued || p.frozen(func() { p.labelStep(id) }) {
		return
	}
	if !p.wantsLabel(id) {
		delete(lc.work, id)
		delete(lc.failures, id)
		return
	}
	lc.work[id] = inFlight
	lw.stats.Patches++
	label := lw.objs[id].part
	w.tracef("%s writes object %d's label %d", p, id, label)
	land := func() {
		if w.setLabel(id, label) {
			w.tracef("%s's label write lands: object %d labelled %d", p, id, label)
		}
	}
	roll := w.rng.IntN(100)
	if w.quiet {
		roll = 100
	}
	switch {
	case p.cutOff || roll < 10:
		w.after(w.latency(), func() { p.labelDone(id, false) })
	case roll < 15:
		if w.rng.IntN(2) == 0 {
			w.after(w.between(0, w.p.clientTimeout), land)
		}
		w.after(w.p.clientTimeout, func() { p.labelDone(id, false) })
	default:
		w.after(w.latency(), func() {
			land()
			w.after(w.latency(), func() { p.labelDone(id, true) })
		})
	}
}

// labelDone is a label write's response: a failure is retried after the
// object's backoff (at once if it was offered again meanwhile).
func (p *proc) labelDone(id int, ok bool) {
	w, lc := p.w, p.pcache.labels
	if !p.alive || p.frozen(func() { p.labelDone(id, ok) }) {
		return
	}
	again := lc.work[id] == inFlightAgain
	if ok {
		delete(lc.failures, id)
		if !again {
			delete(lc.work, id)
			return
		}
	} else {
		lc.failures[id]++
		w.lab.stats.FailedPatches++
	}
	lc.work[id] = queued
	d := time.Duration(0)
	if !again {
		d = min(100*time.Millisecond<<min(lc.failures[id]-1, 20), maxLabelBackoff)
		w.tracef("%s's label write of object %d failed; retrying in %v", p, id, d)
	}
	w.after(d, func() { p.labelStep(id) })
}

// ---- the oracle ----

// labelsAdmit is the oracle's check of a process activating partition q:
// every object of q that the cache can know of is in its views, and both
// views have listed q (synced before act over both views).
func (p *proc) labelsAdmit(q int) bool {
	for _, id := range p.w.lab.byPart[q] {
		if !p.checkObject(id, "as it activates the partition") {
			return false
		}
	}
	lc := p.pcache.labels
	v := p.speaker()
	if lc.segs[q] != nil && v != nil && v.listed && v.keeps.Has(q) && p.pcache.hold.Has(q) {
		return true
	}
	p.w.fail("%s activates %d before its cache has listed it over both views (label segment listed %v; unlabelled view listed %v, keeps it %v; held %v)",
		p, q, lc.segs[q] != nil, v != nil && v.listed, v != nil && v.keeps.Has(q), p.pcache.hold.Has(q))
	return false
}

// checkObjects checks the objects of ids that just left one of the
// process's views, or its views altogether, against the partitions it
// runs (active or draining): their reconciles must still find them.
func (p *proc) checkObjects(ids []int, when string) bool {
	if len(ids) == 0 {
		return true
	}
	running := p.running()
	for _, id := range ids {
		if running.Has(p.w.lab.objs[id].part) && !p.checkObject(id, when) {
			return false
		}
	}
	return true
}

// checkObject fails the seed when object id exists, the cache can know of
// it, and the process's views and pending objects lack it: a reconcile
// there would read NotFound for an object that exists.
//
// The cache can know of an object created before both of its watches'
// positions; one created since may simply not have reached it yet (as with
// any informer). Excused too is an object that has carried another
// partition's label since the older watch's position (a stray): a process
// that does not hold the partition its label names, or has not yet
// listed it, cannot see it. The design has it relabelled by a process
// where that partition is active; the end of the seed checks that every
// object was (checkLabelsSettled).
func (p *proc) checkObject(id int, when string) bool {
	lw, lc := p.w.lab, p.pcache.labels
	lw.stats.ObjectChecks++
	if p.seesObject(id) {
		return true
	}
	o := lw.objs[id]
	from := min(lc.labelPos, lc.unlPos)
	if o.created >= from {
		return true
	}
	stray := func(label int) bool { return label >= 0 && label != o.part }
	excused := stray(lw.labelAt(id, from))
	for _, ch := range o.changes {
		excused = excused || ch.at >= from && stray(ch.label)
	}
	if excused {
		lw.stats.StraysExcused++
		return true
	}
	p.w.fail("object %d of partition %d exists (label %s since log entry %d) but %s's cache does not hold it %s (label segments at %d, unlabelled views at %d of %d log entries; segment %s; unlabelled view %s)",
		id, o.part, labelName(o.label), o.changes[len(o.changes)-1].at, p, when, lc.labelPos, lc.unlPos, len(lw.log),
		p.describeSeg(o.part), p.describeUnlabelled())
	return false
}

func (p *proc) describeSeg(q int) string {
	if s := p.pcache.labels.segs[q]; s != nil {
		return fmt.Sprintf("%d listed at %d", q, s.from)
	}
	return fmt.Sprintf("%d not listed", q)
}

func (p *proc) describeUnlabelled() string {
	v := p.speaker()
	if v == nil {
		return "none"
	}
	return fmt.Sprintf("listed %v at %d, keeps %v, dirty %v (%d views)", v.listed, v.from, v.keeps, v.dirty, len(p.pcache.labels.views))
}

// sortedKeys returns m's keys in order: iterating a map directly would
// make a seed's run depend on Go's map order.
func sortedKeys[V any](m map[int]V) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
