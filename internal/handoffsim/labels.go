package handoffsim

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/kshard/kshard/internal/partitionlabel"
	"github.com/kshard/kshard/shard"
)

// This file models the objects of one kind sharded by labels
// (Options.Labels; shard/cache's Labelled, CacheMode labels) on the API
// server: each object maps to a request whose partition is a pure function
// of its key, and carries a label naming a partition, or no valid one: none,
// a garbled value, or a number out of the ring's range. New objects are
// created unlabelled; a third party strips labels, garbles them and edits
// them to name another partition, at random times while the faults last.
// Every change is one entry of an ordered log, which the processes' views
// (labelcache.go) watch with lags of their own.

// unlabelled is the label of an object without a valid partition label
// (none, or a value that names no partition, which the product's
// partitionlabel.Parse rejects and its unlabelled view selects: every
// such value is the same to the views); absent, in a log entry, is the
// state before a creation.
const (
	unlabelled = -1
	absent     = -2
)

// LabelFix is a change to shard/cache's Labelled as built that the
// simulation of the labels model shows is needed (Options.LabelFixes): without
// each, the oracle finds a seed that breaks (TestSimulationLabelsGaps in
// internal/handoff).
type LabelFix uint8

const (
	// FixStrays: when partitions become active, SetActive offers the
	// labeller the objects whose label names one of them, not only those
	// whose request maps to one. As built, an object labelled for another
	// partition than its own (a stray) that reaches a process before the
	// partition its label names is active there is never relabelled: the
	// process that owns its own partition never sees it.
	FixStrays LabelFix = 1 << iota
	// FixReplacement: when a replacement unlabelled view has listed and
	// takes over, the objects the view it replaces held and it lacks leave
	// as a relist's vanished objects do (pending unless a label segment
	// holds them). As built, its store goes with it: an object labelled
	// between the two views' positions, which the label segment's watch
	// has not delivered yet, is in no view.
	FixReplacement
	// FixPinnedSegments: a label segment lists at the resourceVersion the
	// speaking unlabelled view's store reflects (a LIST with
	// resourceVersionMatch Exact), or, when that view does not keep the
	// partition yet, once a view that does has listed; only then does the
	// partition count synced. As built, the two views list at unrelated
	// versions: an object that moves between them in between (labelled,
	// or stripped by a third party) is in neither until the earlier one's
	// watch delivers the move, and a partition can activate meanwhile.
	FixPinnedSegments
	// AllLabelFixes is the cache as the simulation shows it must be.
	AllLabelFixes = FixStrays | FixReplacement | FixPinnedSegments
)

func (f LabelFix) String() string {
	var s string
	for _, n := range []struct {
		f    LabelFix
		name string
	}{{FixStrays, "strays"}, {FixReplacement, "replacement"}, {FixPinnedSegments, "pinned segments"}} {
		if f&n.f != 0 {
			if s != "" {
				s += "+"
			}
			s += n.name
		}
	}
	if s == "" {
		return "none (as built)"
	}
	return s
}

// invalidLabel draws a label value that names no partition of a ring of
// partitions, as people and tools leave them: none, a garbled value, or a
// number out of range. kind says which (for the counts).
func invalidLabel(rng *rand.Rand, partitions int) (value string, kind invalidKind) {
	switch rng.IntN(3) {
	case 0:
		return "", noLabel
	case 1:
		return []string{"abc", "0x1", "-1", "01", " 1"}[rng.IntN(5)], garbledLabel
	}
	return strconv.Itoa(partitions + rng.IntN(3*partitions)), outOfRangeLabel
}

// invalidKind is the form of a label value that names no partition.
type invalidKind uint8

const (
	noLabel invalidKind = iota
	garbledLabel
	outOfRangeLabel
)

// parseLabel is the label, as the views and the labeller see it, of an
// object carrying value: the partition it names, by the product's parser,
// or unlabelled.
func (lw *labelWorld) parseLabel(value string) int {
	if q, ok := partitionlabel.Parse(value, lw.partitions); ok {
		return q
	}
	return unlabelled
}

// labelObject is one object on the API server.
type labelObject struct {
	part    int           // the partition of the request it maps to: fixed, a function of its key
	label   int           // the partition its label names, or unlabelled
	created int           // the log index of its creation
	changes []labelChange // its label at and after creation, in log order
}

// labelChange: from log index at on, the object carries label.
type labelChange struct{ at, label int }

// labelEvent is one log entry: obj's label went from one value to another
// (from absent: created).
type labelEvent struct{ obj, from, to int }

// labelWorld is the kind's objects on the API server, and the switches
// and counters of the labels model.
type labelWorld struct {
	partitions int
	objs       []labelObject
	byPart     [][]int // object ids per request partition
	log        []labelEvent
	fixes      LabelFix
	// ignoreUnlabelled and dropOnLeave are the mutations of
	// Options.LabelsSyncIgnoresUnlabelled and Options.LabelsDropOnLeave.
	ignoreUnlabelled, dropOnLeave bool
	// quietAt is when the faults stopped; lastFix, when a label write last
	// made an object's label its own partition's after that.
	quietAt, lastFix time.Duration
	stats            LabelStats
}

// LabelStats counts what the labels model did in a seed (Options.Labels).
type LabelStats struct {
	// Objects: at the end of the seed; Created: while it ran (unlabelled);
	// InitiallyUnlabelled and InitiallyStray: of those there at the start,
	// the ones without a valid label (InitiallyGarbled of them carrying a
	// garbled value like "abc", InitiallyOutOfRange a number beyond the
	// ring's partitions; the others none) and those labelled for another
	// partition than their own.
	Objects, Created, InitiallyUnlabelled, InitiallyGarbled, InitiallyOutOfRange, InitiallyStray int
	// Stripped and Edited count the third party's label removals (Garbled
	// of them writing a value that names no partition) and edits to
	// another partition's label.
	Stripped, Garbled, Edited int
	// Patches counts label writes sent; FailedPatches, those that failed
	// (some landed anyway); SlowPatches, labelling steps delayed by 1-5 s.
	Patches, FailedPatches, SlowPatches int
	// UnlabelledLists counts the unlabelled views' LISTs (each process's
	// first and every replacement after a gain of a partition it had
	// dropped objects of: Replacements); FailedUnlabelledLists, those that
	// failed and were retried.
	UnlabelledLists, Replacements, FailedUnlabelledLists int
	// EarlyStarts counts processes whose views started before the ring's
	// first Hold reached their cache; ListedBeforeHold, unlabelled views
	// that listed before it (all their objects dropped: the path of issue
	// 41).
	EarlyStarts, ListedBeforeHold int
	// Relists counts views whose watch expired and which listed again;
	// PinnedLists, label segments listed again at the unlabelled view's
	// version once a view keeping their partition had listed
	// (FixPinnedSegments).
	Relists, PinnedLists int
	// Pending counts objects that left a view and were kept served until
	// a view added them again or a live read decided; ConfirmReads, those
	// live reads.
	Pending, ConfirmReads int
	// ObjectChecks counts the oracle's checks of one object against a
	// process's views; StraysExcused, those an object labelled for a
	// partition the process does not list was excused from.
	ObjectChecks, StraysExcused int
	// Settle is how long after the faults stopped the last label write
	// that gave an object its own partition's label landed (0: none after).
	Settle time.Duration
}

// add counts o into s; Settle keeps the longest.
func (s *LabelStats) add(o LabelStats) {
	s.Objects += o.Objects
	s.Created += o.Created
	s.InitiallyUnlabelled += o.InitiallyUnlabelled
	s.InitiallyGarbled += o.InitiallyGarbled
	s.InitiallyOutOfRange += o.InitiallyOutOfRange
	s.InitiallyStray += o.InitiallyStray
	s.Stripped += o.Stripped
	s.Garbled += o.Garbled
	s.Edited += o.Edited
	s.Patches += o.Patches
	s.FailedPatches += o.FailedPatches
	s.SlowPatches += o.SlowPatches
	s.UnlabelledLists += o.UnlabelledLists
	s.Replacements += o.Replacements
	s.FailedUnlabelledLists += o.FailedUnlabelledLists
	s.EarlyStarts += o.EarlyStarts
	s.ListedBeforeHold += o.ListedBeforeHold
	s.Relists += o.Relists
	s.PinnedLists += o.PinnedLists
	s.Pending += o.Pending
	s.ConfirmReads += o.ConfirmReads
	s.ObjectChecks += o.ObjectChecks
	s.StraysExcused += o.StraysExcused
	s.Settle = max(s.Settle, o.Settle)
}

// newLabelWorld sets up seed's objects when opts asks for the labels model
// (nil otherwise) and schedules the third party and the creations. Its
// draws come from a stream of their own, so that turning the model on
// changes nothing else of the seed until the run starts.
func newLabelWorld(w *world, seed uint64, opts Options) *labelWorld {
	if !opts.Labels {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, 0x6c6162656c73))
	n := w.p.ring.WithDefaults().Partitions
	lw := &labelWorld{partitions: n, byPart: make([][]int, n), fixes: opts.LabelFixes,
		ignoreUnlabelled: opts.LabelsSyncIgnoresUnlabelled, dropOnLeave: opts.LabelsDropOnLeave}
	// A first start over objects without a valid label, steady state, or
	// a mix; now and then an object labelled for another partition than its
	// own (by hand, say). An invalid label is none, garbled or out of range,
	// each read by the product's parser.
	unlabelledPct := []int{100, 50, 0}[rng.IntN(3)]
	for range rng.IntN(2*n + 8) {
		part := rng.IntN(n)
		value := shard.PartitionLabelValue(part)
		if rng.IntN(100) >= unlabelledPct {
			if n > 1 && rng.IntN(20) == 0 {
				value = shard.PartitionLabelValue((part + 1 + rng.IntN(n-1)) % n)
				lw.stats.InitiallyStray++
			}
		} else {
			var kind invalidKind
			value, kind = invalidLabel(rng, n)
			lw.stats.InitiallyUnlabelled++
			lw.stats.InitiallyGarbled += btoi(kind == garbledLabel)
			lw.stats.InitiallyOutOfRange += btoi(kind == outOfRangeLabel)
		}
		lw.create(part, lw.parseLabel(value))
	}
	for range rng.IntN(n + 10) {
		at := time.Duration(rng.Int64N(int64(w.p.faultsEnd)))
		w.after(at, func() { w.createUnlabelled() })
	}
	for range rng.IntN(n/2 + 10) {
		at := time.Duration(rng.Int64N(int64(w.p.faultsEnd)))
		w.after(at, func() { w.tamperLabel() })
	}
	w.after(time.Duration(rng.Int64N(int64(w.p.faultEvery))), w.labelFaults)
	lw.quietAt = w.p.faultsEnd
	return lw
}

// create adds an object of partition part carrying label to the log.
func (lw *labelWorld) create(part, label int) int {
	id := len(lw.objs)
	at := len(lw.log)
	lw.objs = append(lw.objs, labelObject{part: part, label: label, created: at, changes: []labelChange{{at, label}}})
	lw.byPart[part] = append(lw.byPart[part], id)
	lw.log = append(lw.log, labelEvent{obj: id, from: absent, to: label})
	return id
}

// setLabel gives object id label (a write of the API server: a no-op when
// it carries it already) and reports whether it changed.
func (w *world) setLabel(id, label int) bool {
	lw := w.lab
	o := &lw.objs[id]
	if o.label == label {
		return false
	}
	at := len(lw.log)
	lw.log = append(lw.log, labelEvent{obj: id, from: o.label, to: label})
	o.label = label
	o.changes = append(o.changes, labelChange{at, label})
	if w.quiet && label == o.part {
		lw.lastFix = w.now
	}
	w.labelsChanged()
	return true
}

// rv is the resourceVersion of the state of object id the log holds after
// its first upTo entries: the index of its last change before, plus one.
func (lw *labelWorld) rv(id, upTo int) int {
	ch := lw.objs[id].changes
	for i := len(ch) - 1; i >= 0; i-- {
		if ch[i].at < upTo {
			return ch[i].at + 1
		}
	}
	return 0
}

// labelAt is the label object id carries after the first upTo log entries
// (absent before its creation).
func (lw *labelWorld) labelAt(id, upTo int) int {
	ch := lw.objs[id].changes
	for i := len(ch) - 1; i >= 0; i-- {
		if ch[i].at < upTo {
			return ch[i].label
		}
	}
	return absent
}

// createUnlabelled is a user creating an object: unlabelled, of a random
// partition. Creations stop with the faults, so that the end of a seed can
// judge that every object got its label.
func (w *world) createUnlabelled() {
	if w.quiet || w.violation != "" {
		return
	}
	lw := w.lab
	id := lw.create(w.rng.IntN(lw.partitions), unlabelled)
	lw.stats.Created++
	w.tracef("USER creates object %d of partition %d, unlabelled", id, lw.objs[id].part)
	w.labelsChanged()
}

// tamperLabel is a third party changing an object's label by hand: removing
// it (or replacing the object without it), writing a value that names no
// partition (garbled or out of range: the same to the views), or writing
// another partition's. It stops with the faults.
func (w *world) tamperLabel() {
	lw := w.lab
	if w.quiet || w.violation != "" || len(lw.objs) == 0 {
		return
	}
	id := w.rng.IntN(len(lw.objs))
	o := lw.objs[id]
	value, kind := invalidLabel(w.rng, lw.partitions)
	if lw.partitions > 1 && w.rng.IntN(2) == 0 {
		value = shard.PartitionLabelValue((o.part + 1 + w.rng.IntN(lw.partitions-1)) % lw.partitions)
	}
	label := lw.parseLabel(value)
	if label == o.label {
		return
	}
	if label == unlabelled {
		lw.stats.Stripped++
		lw.stats.Garbled += btoi(kind != noLabel)
		w.tracef("THIRD PARTY strips object %d's label %s (partition %d), writing %q", id, labelName(o.label), o.part, value)
	} else {
		lw.stats.Edited++
		w.tracef("THIRD PARTY edits object %d's label %s to %d (partition %d)", id, labelName(o.label), label, o.part)
	}
	w.setLabel(id, label)
}

// labelFaults injects, while the faults last, a fault of one live
// process's views, and schedules the next.
func (w *world) labelFaults() {
	if w.quiet || w.violation != "" {
		return
	}
	defer w.after(w.between(0, 2*w.p.faultEvery), w.labelFaults)
	if alive := w.alive(); len(alive) > 0 {
		w.labelFault(alive[w.rng.IntN(len(alive))])
	}
}

// labelFault is one fault of a process's views: a watch that turns slow,
// or one that expires and lists again.
func (w *world) labelFault(p *proc) {
	lc := p.pcache.labels
	switch w.rng.IntN(4) {
	case 0, 1:
		until := w.now + w.between(time.Second, 2*w.p.leaseDuration)
		slow := w.between(100*time.Millisecond, 5*time.Second)
		if w.rng.IntN(2) == 0 {
			lc.labelSlowUntil, lc.labelSlow = until, slow
			w.tracef("%s label segments' watch slow (≤%v) until %.3fs", p, slow, until.Seconds())
		} else {
			lc.unlSlowUntil, lc.unlSlow = until, slow
			w.tracef("%s unlabelled view's watch slow (≤%v) until %.3fs", p, slow, until.Seconds())
		}
	default:
		p.relistView()
	}
}

// labelsChanged has every live process's views learn of the log's new
// entries, each view's watch after its own lag.
func (w *world) labelsChanged() {
	upTo := len(w.lab.log)
	for _, p := range w.procs {
		if p.alive && p.pcache.labels != nil {
			p.watchLabels(upTo)
		}
	}
}

// labelName prints a label value.
func labelName(label int) string {
	switch label {
	case unlabelled:
		return "(none)"
	case absent:
		return "(absent)"
	}
	return fmt.Sprint(label)
}

// checkLabelsSettled is the end of a seed's check of the labels model: the
// faults (the third party's edits among them) stopped a while ago and
// every partition is active on a live member, so every object must carry
// its own partition's label, or have a label write under way on a live
// process (in flight, or waiting out its retry backoff). An object nobody
// labels is one a controller of its partition may never see: one left
// unlabelled where no unlabelled view keeps it, or a stray (labelled for
// another partition) that no process relabels.
func (w *world) checkLabelsSettled() {
	lw := w.lab
	if lw == nil || w.violation != "" {
		return
	}
	lw.stats.Objects = len(lw.objs)
	if lw.lastFix > 0 {
		lw.stats.Settle = lw.lastFix - lw.quietAt
	}
	for id, o := range lw.objs {
		if o.label == o.part || w.labelling(id) {
			continue
		}
		w.fail("liveness: object %d of partition %d still carries label %s %v after the faults stopped, and no live process is labelling it: %s",
			id, o.part, labelName(o.label), w.now-lw.quietAt, w.describeLabelHolders(id))
		return
	}
	w.checkLabelsCached()
}

// checkLabelsCached is the end of a seed's check that the cache serves what
// exists: every object is in the cache of the live process its partition
// is active on. The activation check (labelsAdmit) covers what a process
// can know of as it activates; this covers the rest, a view that reported
// synced with objects missing and never listed them again among it (issue
// 41): those objects would be reconciled only when they next change, and
// read as NotFound meanwhile. The seed ends once every partition has been
// active on one live member for a LeaseDuration after the faults settled,
// far beyond the watches' lags, so nothing in transit excuses a miss.
func (w *world) checkLabelsCached() {
	lw := w.lab
	for id, o := range lw.objs {
		p := w.runningBy[o.part]
		if p == nil || !p.alive || !p.active.Has(o.part) || p.seesObject(id) {
			continue
		}
		w.fail("liveness: object %d of partition %d exists (label %s since log entry %d) but %s, where its partition is active, does not cache it %v after the faults stopped (segment %s; unlabelled view %s)",
			id, o.part, labelName(o.label), o.changes[len(o.changes)-1].at, p, w.now-lw.quietAt, p.describeSeg(o.part), p.describeUnlabelled())
		return
	}
}

// labelling reports whether a live process has a label write of object id
// queued, in flight or waiting to be retried.
func (w *world) labelling(id int) bool {
	for _, p := range w.alive() {
		if lc := p.pcache.labels; lc != nil && lc.work[id] != idle {
			return true
		}
	}
	return false
}

// describeLabelHolders says, for a failure, what each live process's views
// hold of object id and which partitions it has active.
func (w *world) describeLabelHolders(id int) string {
	var s string
	for _, p := range w.alive() {
		lc := p.pcache.labels
		if lc == nil {
			continue
		}
		label, _, seen := p.findObject(id)
		s += fmt.Sprintf("| %s active %v held %v sees it %v (label %s) ", p, lc.active, p.pcache.hold, seen, labelName(label))
	}
	return s
}
