package recorder

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Report is what Check found in a recorder directory.
type Report struct {
	Processes int
	Keys      int // distinct keys reconciled or written
	Intervals int
	Completed int
	Failed    int // returned without finishing (context cancelled)
	// Killed, Exited and Open count reconciles without an end line, by how
	// their end was taken (see EndKilled, EndExited, EndOpen).
	Killed, Exited, Open int
	Writes               int
	RingEvents           int
	Torn                 int

	// Overlaps are pairs of reconciles of one key by two processes at once:
	// the invariant kshard exists to keep.
	Overlaps []Overlap
	// SelfOverlaps are pairs of reconciles of one key at once within one
	// process, which a workqueue must never hand out.
	SelfOverlaps []Overlap
	// PartitionOverlaps are pairs of processes whose active windows for one
	// partition intersect: a handoff that activated before the drain ended.
	PartitionOverlaps []PartitionOverlap
	// Lost are keys whose last written generation no finished reconcile saw.
	Lost []Lost
	// NotFounds counts the reconciles' cache reads that found no object
	// (KindNotFound), and Vanished lists those of them that began after
	// the object's creation was acknowledged: a cache that reported an
	// existing object gone. The records hold no deletions (no writer of
	// the kit deletes an object), so an object exists from its first
	// acknowledged write on.
	NotFounds int
	Vanished  []Vanished
	// Liveness is how long the writes waited to be reconciled, and with a
	// bound (CheckWithin) those that waited too long.
	Liveness Liveness
}

// Vanished is a cache read that found no object although the object
// existed: its creation was acknowledged at Created, before the read began.
type Vanished struct {
	Read    Record // the KindNotFound record
	Created int64
}

func (v Vanished) String() string {
	return fmt.Sprintf("key %s: %s read it from its cache as NotFound over %d..%d, though it was created at %d", v.Read.Key, v.Read.Process, v.Read.Start, v.Read.At, v.Created)
}

// PartitionOverlap is two processes' intersecting windows of one partition.
type PartitionOverlap struct{ A, B Window }

func (o PartitionOverlap) String() string {
	return fmt.Sprintf("partition %d:\n    %s\n    %s", o.A.Partition, o.A, o.B)
}

// Overlap is two reconciles of one key whose intervals intersect.
type Overlap struct{ A, B Interval }

func (o Overlap) String() string { return fmt.Sprintf("key %s:\n    %s\n    %s", o.A.Key, o.A, o.B) }

// Lost is a key whose final update was never reconciled.
type Lost struct {
	Key string
	// FinalGen is the last generation written, at WrittenAt (acknowledged).
	FinalGen  int64
	WrittenAt int64
	// Reconciled is the highest generation a finished reconcile saw (0: none).
	Reconciled int64
}

func (l Lost) String() string {
	return fmt.Sprintf("key %s: final gen %d written at %d, highest gen reconciled to the end %d", l.Key, l.FinalGen, l.WrittenAt, l.Reconciled)
}

// OK reports whether no key was reconciled twice at once, no update lost,
// no existing object read as NotFound, and no write reconciled later than
// the liveness bound (when checked with one).
func (r Report) OK() bool {
	return len(r.Overlaps) == 0 && len(r.SelfOverlaps) == 0 && len(r.PartitionOverlaps) == 0 && len(r.Lost) == 0 && len(r.Vanished) == 0 &&
		len(r.Liveness.Overdue) == 0
}

// maxListed bounds the details String prints per kind of problem.
const maxListed = 20

func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d processes, %d keys, %d reconciles (%d completed, %d failed, %d cut by kill, %d abandoned at exit, %d open), %d writes, %d ring events, %d torn lines, %d NotFound reads; %d overlaps, %d self-overlaps, %d partition overlaps, %d lost updates, %d existing objects read as NotFound",
		r.Processes, r.Keys, r.Intervals, r.Completed, r.Failed, r.Killed, r.Exited, r.Open, r.Writes, r.RingEvents, r.Torn, r.NotFounds, len(r.Overlaps), len(r.SelfOverlaps), len(r.PartitionOverlaps), len(r.Lost), len(r.Vanished))
	list := func(title string, n int, item func(int) string) {
		for i := 0; i < n && i < maxListed; i++ {
			fmt.Fprintf(&b, "\n  %s %s", title, item(i))
		}
		if n > maxListed {
			fmt.Fprintf(&b, "\n  … and %d more %s", n-maxListed, title)
		}
	}
	list("OVERLAP", len(r.Overlaps), func(i int) string { return r.Overlaps[i].String() })
	list("SELF-OVERLAP", len(r.SelfOverlaps), func(i int) string { return r.SelfOverlaps[i].String() })
	list("PARTITION-OVERLAP", len(r.PartitionOverlaps), func(i int) string { return r.PartitionOverlaps[i].String() })
	list("LOST", len(r.Lost), func(i int) string { return r.Lost[i].String() })
	list("VANISHED", len(r.Vanished), func(i int) string { return r.Vanished[i].String() })
	fmt.Fprintf(&b, "\n  liveness: %s", r.Liveness)
	list("OVERDUE", len(r.Liveness.Overdue), func(i int) string { return r.Liveness.Overdue[i].String() })
	return b.String()
}

// Check loads dir and checks it; see Log.Check.
func Check(dir string) (Report, error) { return CheckWithin(dir, 0) }

// Check finds overlapping reconciles, overlapping partition ownership, lost
// updates and existing objects read as NotFound, and measures how long the
// writes waited to be reconciled without bounding it (CheckWithin bounds
// it).
//
// Two intervals overlap when each starts strictly before the other ends, so
// a reconcile that starts the instant another ended is a clean handoff.
// A reconcile without an end line lasts until its process was seen dead, or
// forever if it was not: the checker may only err towards reporting.
//
// A key's final update counts as reconciled when a reconcile that saw its
// generation (or a later one, written after the writer's last acknowledged
// update when a write's outcome was unknown) ran to its end. Seeing the
// generation proves the reconcile read the object after the write, so no
// start-time comparison is needed; and a reconcile cut short by a kill does
// not count, nor does one that returned early because its context was
// cancelled: their work was never finished.
func (log *Log) Check() Report { return log.CheckWithin(0) }

// check is Check without the liveness measurements.
func (log *Log) check() Report {
	r := Report{Processes: len(log.Processes()), Intervals: len(log.Intervals), Writes: len(log.Writes), RingEvents: len(log.Ring), Torn: log.Torn}
	byKey := map[string][]Interval{}
	for _, iv := range log.Intervals {
		byKey[iv.Key] = append(byKey[iv.Key], iv)
		switch {
		case iv.Completed():
			r.Completed++
		case iv.Ending == EndRecorded:
			r.Failed++
		case iv.Ending == EndKilled:
			r.Killed++
		case iv.Ending == EndExited:
			r.Exited++
		case iv.Ending == EndOpen:
			r.Open++
		}
	}
	final := map[string]Record{}
	for _, w := range log.Writes {
		if f, ok := final[w.Key]; !ok || w.Gen > f.Gen {
			final[w.Key] = w
		}
	}
	keys := map[string]bool{}
	for k := range byKey {
		keys[k] = true
	}
	for k := range final {
		keys[k] = true
	}
	r.Keys = len(keys)

	for _, ivs := range byKey {
		r.addOverlaps(ivs)
	}
	for _, ws := range log.Windows() {
		r.addPartitionOverlaps(ws)
	}
	sort.Slice(r.PartitionOverlaps, func(i, j int) bool {
		a, b := r.PartitionOverlaps[i], r.PartitionOverlaps[j]
		return a.A.Start < b.A.Start || a.A.Start == b.A.Start && a.A.Partition < b.A.Partition
	})
	for key, w := range final {
		var best int64
		for _, iv := range byKey[key] {
			if iv.Completed() && iv.Gen > best {
				best = iv.Gen
			}
		}
		if best < w.Gen {
			r.Lost = append(r.Lost, Lost{Key: key, FinalGen: w.Gen, WrittenAt: w.At, Reconciled: best})
		}
	}
	sort.Slice(r.Lost, func(i, j int) bool { return r.Lost[i].Key < r.Lost[j].Key })
	r.NotFounds = len(log.NotFounds)
	r.Vanished = log.vanished()
	sortOverlaps(r.Overlaps)
	sortOverlaps(r.SelfOverlaps)
	return r
}

// addOverlaps sweeps one key's intervals in start order: each is compared
// with the later-starting ones that begin before it ends.
func (r *Report) addOverlaps(ivs []Interval) {
	sort.Slice(ivs, func(i, j int) bool { return ivs[i].Start < ivs[j].Start })
	for i, a := range ivs {
		for _, b := range ivs[i+1:] {
			if b.Start >= a.End {
				break
			}
			if a.Process == b.Process {
				r.SelfOverlaps = append(r.SelfOverlaps, Overlap{A: a, B: b})
			} else {
				r.Overlaps = append(r.Overlaps, Overlap{A: a, B: b})
			}
		}
	}
}

// addPartitionOverlaps does for one partition's windows what addOverlaps
// does for a key's intervals.
func (r *Report) addPartitionOverlaps(ws []Window) {
	sort.Slice(ws, func(i, j int) bool { return ws[i].Start < ws[j].Start })
	for i, a := range ws {
		for _, b := range ws[i+1:] {
			if b.Start >= a.End {
				break
			}
			r.PartitionOverlaps = append(r.PartitionOverlaps, PartitionOverlap{A: a, B: b})
		}
	}
}

func sortOverlaps(list []Overlap) {
	sort.Slice(list, func(i, j int) bool { return list[i].A.Start < list[j].A.Start })
}

// Takeover measures a handoff away from process p that began at time at (a
// SIGTERM or SIGKILL): the partitions p held then, and how long until every
// one of them had been activated by another process. It fails, naming them,
// if some were never taken over.
func (log *Log) Takeover(p Process, at time.Time) (gap time.Duration, held []int, err error) {
	t := at.UnixNano()
	held = log.ActiveAt(p, t)
	firstElsewhere := map[int]int64{}
	for _, r := range log.Ring {
		if r.Kind != KindActivate || r.Process == p || r.At < t {
			continue
		}
		for _, part := range r.Partitions {
			if first, seen := firstElsewhere[part]; !seen || r.At < first {
				firstElsewhere[part] = r.At
			}
		}
	}
	var latest int64 = t
	var missing []int
	for _, part := range held {
		a, ok := firstElsewhere[part]
		if !ok {
			missing = append(missing, part)
			continue
		}
		latest = max(latest, a)
	}
	if len(missing) > 0 {
		return 0, held, fmt.Errorf("%d of the %d partitions %s held at %s were never activated elsewhere: %s", len(missing), len(held), p, at.Format(time.RFC3339Nano), joinInts(missing))
	}
	return time.Duration(latest - t), held, nil
}

// vanished lists the NotFound reads that began after their object's first
// acknowledged write, in the order they began.
func (log *Log) vanished() []Vanished {
	created := map[string]int64{}
	for _, w := range log.Writes {
		if c, ok := created[w.Key]; !ok || w.At < c {
			created[w.Key] = w.At
		}
	}
	var out []Vanished
	for _, nf := range log.NotFounds {
		if c, ok := created[nf.Key]; ok && c < nf.Start {
			out = append(out, Vanished{Read: nf, Created: c})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Read.Start < out[j].Read.Start })
	return out
}
