package recorder

import (
	"fmt"
	"sort"
	"time"
)

// Liveness is how long the writer's updates waited to be reconciled: for
// each acknowledged write, from its acknowledgement to the end of the first
// finished reconcile of its key that saw its generation or a later one.
// When the records hold ring events, no wait starts before the first
// activation of any partition: objects created before any replica ran
// (as tests do before starting them) wait from the ring's first activation.
//
// A write that is never reconciled so has no wait: it is a lost update (if
// it is its key's last) or was superseded by one.
type Liveness struct {
	// Bound is the wait allowed to a write that no recorded fault
	// overlapped (0: not checked; see CheckWithin).
	Bound time.Duration
	// Reconciled counts the writes that were reconciled.
	Reconciled int
	// Worst is the longest wait, and WorstWrite that write (zero Kind when
	// none was reconciled).
	Worst      time.Duration
	WorstWrite Record
	// WorstNet is the longest wait less the faults that extended its
	// write's allowance (with no Bound, the faults its wait overlapped):
	// the figure Bound is compared with, at least 0. Equal to Worst when no
	// fault was recorded.
	WorstNet      time.Duration
	WorstNetWrite Record
	// Overdue are the writes that waited longer than allowed.
	Overdue []Overdue
}

// Overdue is a write reconciled later than its allowance: Bound, extended
// by the length of every recorded fault that overlapped the allowance.
type Overdue struct {
	Write Record // the KindWrite record
	// ReconciledAt is the end of the first finished reconcile that saw
	// Write's generation or a later one; Wait is from Write.At (or the
	// ring's first activation, if later) to it.
	ReconciledAt int64
	Wait         time.Duration
	// Allowed is the bound plus the faults' extension.
	Allowed time.Duration
}

func (o Overdue) String() string {
	return fmt.Sprintf("key %s: gen %d acknowledged at %d was first reconciled at %d, %s later; allowed %s",
		o.Write.Key, o.Write.Gen, o.Write.At, o.ReconciledAt, o.Wait.Round(time.Millisecond), o.Allowed.Round(time.Millisecond))
}

func (l Liveness) String() string {
	if l.Reconciled == 0 {
		return "no write reconciled"
	}
	s := fmt.Sprintf("%d writes reconciled, longest wait %s (key %s gen %d), longest net of faults %s (key %s gen %d)",
		l.Reconciled, l.Worst.Round(time.Millisecond), l.WorstWrite.Key, l.WorstWrite.Gen,
		l.WorstNet.Round(time.Millisecond), l.WorstNetWrite.Key, l.WorstNetWrite.Gen)
	if l.Bound > 0 {
		s += fmt.Sprintf("; bound %s: %d overdue", l.Bound, len(l.Overdue))
	}
	return s
}

// CheckWithin is Check that also fails writes reconciled later than bound
// after their acknowledgement (Report.Liveness.Overdue; Report.OK is then
// false). A recorded fault (KindFault: an outage, a pause, a cut-off
// replica) that overlaps a write's allowance extends the allowance by the
// fault's length, and the extended allowance may reach further faults.
// bound 0 checks no bound: Check is CheckWithin(0).
func (log *Log) CheckWithin(bound time.Duration) Report {
	r := log.check()
	r.Liveness = log.liveness(bound)
	return r
}

// CheckWithin loads dir and checks it with a liveness bound; see
// Log.CheckWithin.
func CheckWithin(dir string, bound time.Duration) (Report, error) {
	log, err := Load(dir)
	if err != nil {
		return Report{}, err
	}
	return log.CheckWithin(bound), nil
}

// liveness measures every write's wait and lists those over bound.
func (log *Log) liveness(bound time.Duration) Liveness {
	l := Liveness{Bound: bound}
	var firstActive int64 // 0: no ring events recorded
	for _, r := range log.Ring {
		if r.Kind == KindActivate && (firstActive == 0 || r.At < firstActive) {
			firstActive = r.At
		}
	}
	// Each key's finished reconciles, latest end first, so that a backward
	// sweep keeps the earliest end among those that saw a given generation.
	done := map[string][]Interval{}
	for _, iv := range log.Intervals {
		if iv.Completed() {
			done[iv.Key] = append(done[iv.Key], iv)
		}
	}
	writes := map[string][]Record{}
	for _, w := range log.Writes {
		writes[w.Key] = append(writes[w.Key], w)
	}
	keys := make([]string, 0, len(writes))
	for k := range writes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		ivs := done[key]
		// By generation, highest first: the earliest end among the
		// reconciles that saw at least gen g is a running minimum.
		sort.Slice(ivs, func(i, j int) bool { return ivs[i].Gen > ivs[j].Gen })
		ws := writes[key]
		sort.Slice(ws, func(i, j int) bool { return ws[i].Gen > ws[j].Gen || ws[i].Gen == ws[j].Gen && ws[i].At < ws[j].At })
		first := int64(-1) // earliest end of a reconcile that saw >= the current write's gen
		next := 0
		for _, w := range ws {
			for ; next < len(ivs) && ivs[next].Gen >= w.Gen; next++ {
				if first < 0 || ivs[next].End < first {
					first = ivs[next].End
				}
			}
			if first < 0 {
				continue // never reconciled at its generation
			}
			l.Reconciled++
			// A reconcile that saw the generation read it after the
			// write landed; its end can still precede the writer's
			// acknowledgement by a moment.
			from := max(w.At, firstActive)
			wait := time.Duration(max(first-from, 0))
			extension := log.faultExtension(from, bound, wait)
			if wait > l.Worst || l.WorstWrite.Kind == "" {
				l.Worst, l.WorstWrite = wait, w
			}
			// An outage's extension includes the informers' recovery
			// allowance, so it can exceed the wait: such a write waited
			// nothing beyond its faults (net 0, never negative).
			if net := max(wait-extension, 0); net > l.WorstNet || l.WorstNetWrite.Kind == "" {
				l.WorstNet, l.WorstNetWrite = net, w
			}
			if bound > 0 && wait > bound+extension {
				l.Overdue = append(l.Overdue, Overdue{Write: w, ReconciledAt: first, Wait: wait, Allowed: bound + extension})
			}
		}
	}
	sort.Slice(l.Overdue, func(i, j int) bool { return l.Overdue[i].Write.At < l.Overdue[j].Write.At })
	return l
}

// faultExtension is how much the recorded faults extend the allowance of a
// write acknowledged at at: the summed length of every fault that overlaps
// [at, at+bound+extension], grown until no further fault is reached. With
// bound 0 (nothing checked) it is the faults that overlapped the write's
// actual wait, for WorstNet.
func (log *Log) faultExtension(at int64, bound, wait time.Duration) time.Duration {
	var ext time.Duration
	if bound == 0 {
		for _, f := range log.Faults {
			if f.End > at && f.Start < at+int64(wait) {
				ext += time.Duration(f.End - f.Start)
			}
		}
		return ext
	}
	counted := make([]bool, len(log.Faults))
	for grew := true; grew; {
		grew = false
		deadline := at + int64(bound+ext)
		for i, f := range log.Faults {
			if counted[i] || f.End <= at || f.Start >= deadline {
				continue
			}
			counted[i] = true
			ext += time.Duration(f.End - f.Start)
			grew = true
		}
	}
	return ext
}

// Fault records that a fault kept replicas from reconciling from start
// until end, what says which (an outage, a pause, a replica cut off):
// CheckWithin extends the allowance of the writes it overlaps by its
// length. Set end past the fault's own end by the recovery it forces, as
// client-go's informer backoff after an API server outage.
func (w *Writer) Fault(what string, start, end time.Time) error {
	if end.Before(start) {
		return fmt.Errorf("recorder: fault %q ends at %s, before it starts at %s", what, end.Format(time.RFC3339Nano), start.Format(time.RFC3339Nano))
	}
	return w.Append(Record{Kind: KindFault, Value: what, Start: start.UnixNano(), End: end.UnixNano(), At: time.Now().UnixNano()})
}
