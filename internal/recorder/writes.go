package recorder

import (
	"fmt"
	"sort"
	"strings"
)

// WriteReport is what CheckWrites found about the replicas' writes of the
// objects they reconcile (KindSend records).
type WriteReport struct {
	Sends   int
	Writing int // reconciles that sent at least one write
	// Overlaps are pairs of reconciles of one key by two processes that
	// both sent a write, where each started before the other's last send:
	// two replicas acting on one key at once. A reconcile counts from its
	// start to its last send, not to its end: a paused process's reconcile
	// may span a peer's, and what matters is that nothing left it after.
	Overlaps []Overlap
	// Late are writes sent after their reconcile's lease validity passed.
	Late []Record
	// Regressions are writes sent after a write of the same key by another
	// process that had seen a later generation: a stale write landing over
	// a newer one, the lost update blind writes suffer.
	Regressions []Regression
	// Stale are objects whose final state is not their last sent write.
	Stale []Stale
}

// Regression is a write (Late) sent after a newer one (Newer) of its key.
type Regression struct{ Newer, Late Record }

func (g Regression) String() string {
	return fmt.Sprintf("key %s: %s wrote gen %d at %d, after %s wrote gen %d at %d", g.Late.Key, g.Late.Process, g.Late.Gen, g.Late.At, g.Newer.Process, g.Newer.Gen, g.Newer.At)
}

// Stale is an object whose final state differs from its last sent write.
type Stale struct {
	Key   string
	Final string // the value the object ended with ("": none)
	Last  Record // the last write sent
}

func (s Stale) String() string {
	return fmt.Sprintf("key %s: final value %q, last write sent %q by %s at %d", s.Key, s.Final, s.Last.Value, s.Last.Process, s.Last.At)
}

// OK reports whether the writes show no violation.
func (r WriteReport) OK() bool {
	return len(r.Overlaps) == 0 && len(r.Late) == 0 && len(r.Regressions) == 0 && len(r.Stale) == 0
}

func (r WriteReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d writes sent by %d reconciles; %d overlapping writing reconciles, %d late writes, %d regressions, %d stale objects",
		r.Sends, r.Writing, len(r.Overlaps), len(r.Late), len(r.Regressions), len(r.Stale))
	list := func(title string, n int, item func(int) string) {
		for i := 0; i < n && i < maxListed; i++ {
			fmt.Fprintf(&b, "\n  %s %s", title, item(i))
		}
		if n > maxListed {
			fmt.Fprintf(&b, "\n  … and %d more %s", n-maxListed, title)
		}
	}
	list("WRITE-OVERLAP", len(r.Overlaps), func(i int) string { return r.Overlaps[i].String() })
	list("LATE", len(r.Late), func(i int) string {
		s := r.Late[i]
		return fmt.Sprintf("key %s: %s sent %q at %d, its lease valid until %d", s.Key, s.Process, s.Value, s.At, s.Until)
	})
	list("REGRESSION", len(r.Regressions), func(i int) string { return r.Regressions[i].String() })
	list("STALE", len(r.Stale), func(i int) string { return r.Stale[i].String() })
	return b.String()
}

// CheckWrites checks the replicas' sent writes against each other and
// against final, the value every written object ended with (by key; a
// missing key reads as ""). Records are times on one machine's wall clock,
// taken just before each send, so a send recorded later was sent later.
func (log *Log) CheckWrites(final map[string]string) WriteReport {
	r := WriteReport{Sends: len(log.Sends)}
	type procSeq struct {
		Process
		seq uint64
	}
	lastSend := map[procSeq]int64{}
	byKey := map[string][]Record{}
	for _, s := range log.Sends {
		id := procSeq{s.Process, s.Seq}
		lastSend[id] = max(lastSend[id], s.At)
		byKey[s.Key] = append(byKey[s.Key], s)
		if s.Late {
			r.Late = append(r.Late, s)
		}
	}
	r.Writing = len(lastSend)

	// Writing reconciles, cut at their last send.
	writing := map[string][]Interval{}
	for _, iv := range log.Intervals {
		if at, ok := lastSend[procSeq{iv.Process, iv.Seq}]; ok {
			iv.End = at
			writing[iv.Key] = append(writing[iv.Key], iv)
		}
	}
	for _, ivs := range writing {
		sort.Slice(ivs, func(i, j int) bool { return ivs[i].Start < ivs[j].Start })
		for i, a := range ivs {
			for _, b := range ivs[i+1:] {
				if b.Start >= a.End {
					break
				}
				if a.Process != b.Process {
					r.Overlaps = append(r.Overlaps, Overlap{A: a, B: b})
				}
			}
		}
	}
	sortOverlaps(r.Overlaps)

	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		sends := byKey[key]
		sort.SliceStable(sends, func(i, j int) bool { return sends[i].At < sends[j].At })
		var newest Record // the send of the highest generation so far
		for _, s := range sends {
			if newest.Kind != "" && s.Gen < newest.Gen && s.Process != newest.Process {
				r.Regressions = append(r.Regressions, Regression{Newer: newest, Late: s})
			}
			if newest.Kind == "" || s.Gen >= newest.Gen {
				newest = s
			}
		}
		last := sends[len(sends)-1]
		if final[key] != last.Value {
			r.Stale = append(r.Stale, Stale{Key: key, Final: final[key], Last: last})
		}
	}
	return r
}

// WriteValue is what a replica writes into the object it reconciles: the
// generation it saw, then which reconcile of which process wrote it.
func WriteValue(gen int64, p Process, seq uint64) string {
	return fmt.Sprintf("%d %s/%d", gen, p, seq)
}
