package recorder

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// How an Interval's End was found.
const (
	// EndRecorded: the reconcile wrote its end line.
	EndRecorded = "recorded"
	// EndKilled: the process was SIGKILLed mid-reconcile; End is when the
	// harness saw it dead, when its reconciles really stopped.
	EndKilled = "killed"
	// EndExited: no end line although the process exited without being
	// killed (it gave up a reconcile on its way out); End is its exit.
	EndExited = "exited"
	// EndOpen: no end line and the process is not known dead. End is the end
	// of time, so the interval overlaps everything after its start.
	EndOpen = "open"
)

// Interval is one reconcile of Key by one process, from before it read the
// object (which it saw at generation Gen) until it returned.
type Interval struct {
	Process
	Seq        uint64
	Key        string
	Gen        int64
	Start, End int64
	Ending     string
	// Err is why a reconcile that returned did not finish its work.
	Err string
}

// Completed reports whether the reconcile returned having done its work.
func (iv Interval) Completed() bool { return iv.Ending == EndRecorded && iv.Err == "" }

func (iv Interval) String() string {
	end := "∞"
	if iv.End != math.MaxInt64 {
		end = fmt.Sprint(iv.End)
	}
	ending := iv.Ending
	if iv.Err != "" {
		ending += ": " + iv.Err
	}
	return fmt.Sprintf("{%s key=%s gen=%d start=%d end=%s (%s) seq=%d}", iv.Process, iv.Key, iv.Gen, iv.Start, end, ending, iv.Seq)
}

// Log is every recorder file of a directory, merged.
type Log struct {
	// Intervals holds every reconcile, finished or cut short.
	Intervals []Interval
	// Ring holds activate/revoke/revoked records, each process's in the
	// order it wrote them.
	Ring []Record
	// Writes holds the writer's acknowledged updates.
	Writes []Record
	// Sends holds the replicas' writes of reconciled objects (KindSend),
	// each process's in the order it sent them.
	Sends []Record
	// NotFounds holds the reconciles' cache reads that found no object
	// (KindNotFound).
	NotFounds []Record
	// Signals holds the harness's term, kill and exit records.
	Signals []Record
	// Faults holds the faults recorded (KindFault), for the liveness
	// check.
	Faults []Record
	// Torn counts last lines cut short by a SIGKILL during their write.
	Torn int
}

// Load reads and merges every *.jsonl file in dir. A malformed line is an
// error unless it is a file's unterminated last line, which a process killed
// during the write leaves behind.
func Load(dir string) (*Log, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*"+FileSuffix))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	log := &Log{}
	starts := map[procSeq]Record{}
	ends := map[procSeq]Record{}
	for _, path := range paths {
		if err := log.readFile(path, starts, ends); err != nil {
			return nil, err
		}
	}
	exits := map[Process]Record{}
	killed := map[Process]bool{}
	for _, s := range log.Signals {
		switch s.Kind {
		case KindExit:
			exits[s.Process] = s
		case KindKill:
			killed[s.Process] = true
		}
	}
	for id, s := range starts {
		iv := Interval{Process: s.Process, Seq: s.Seq, Key: s.Key, Gen: s.Gen, Start: s.Start, End: math.MaxInt64, Ending: EndOpen}
		if e, ok := ends[id]; ok {
			iv.End, iv.Ending, iv.Err = e.End, EndRecorded, e.Error
		} else if exit, ok := exits[s.Process]; ok {
			iv.End, iv.Ending = exit.At, EndExited
			if killed[s.Process] {
				iv.Ending = EndKilled
			}
		}
		log.Intervals = append(log.Intervals, iv)
	}
	// An end line is self-contained: keep it even if its start line was lost.
	for id, e := range ends {
		if _, ok := starts[id]; !ok {
			log.Intervals = append(log.Intervals, Interval{Process: e.Process, Seq: e.Seq, Key: e.Key, Gen: e.Gen, Start: e.Start, End: e.End, Ending: EndRecorded, Err: e.Error})
		}
	}
	sort.Slice(log.Intervals, func(i, j int) bool {
		a, b := log.Intervals[i], log.Intervals[j]
		if a.Start != b.Start {
			return a.Start < b.Start
		}
		return a.Process.String() < b.Process.String()
	})
	return log, nil
}

type procSeq struct {
	Process
	seq uint64
}

func (log *Log) readFile(path string, starts, ends map[procSeq]Record) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := bytes.Split(data, []byte("\n"))
	for i, line := range lines {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			if i == len(lines)-1 { // no newline after it: the write was cut short
				log.Torn++
				continue
			}
			return fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		switch r.Kind {
		case KindStart:
			starts[procSeq{r.Process, r.Seq}] = r
		case KindEnd:
			ends[procSeq{r.Process, r.Seq}] = r
		case KindActivate, KindRevoke, KindRevoked:
			log.Ring = append(log.Ring, r)
		case KindWrite:
			log.Writes = append(log.Writes, r)
		case KindSend:
			log.Sends = append(log.Sends, r)
		case KindNotFound:
			log.NotFounds = append(log.NotFounds, r)
		case KindTerm, KindKill, KindExit:
			log.Signals = append(log.Signals, r)
		case KindFault:
			log.Faults = append(log.Faults, r)
		default:
			return fmt.Errorf("%s:%d: unknown record kind %q", path, i+1, r.Kind)
		}
	}
	return nil
}

// Processes lists every replica process that left a record, sorted.
func (log *Log) Processes() []Process {
	seen := map[Process]bool{}
	for _, iv := range log.Intervals {
		seen[iv.Process] = true
	}
	for _, r := range log.Ring {
		seen[r.Process] = true
	}
	out := make([]Process, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// ActiveAt replays p's ring events up to and including time at and returns
// the partitions p was allowed to reconcile then: activated and not yet
// being revoked.
func (log *Log) ActiveAt(p Process, at int64) []int {
	active := map[int]bool{}
	for _, r := range log.Ring {
		if r.Process != p || r.At > at {
			continue
		}
		for _, part := range r.Partitions {
			switch r.Kind {
			case KindActivate:
				active[part] = true
			case KindRevoke:
				delete(active, part)
			}
		}
	}
	return sortedKeys(active)
}

// Owners maps every partition active at time at to the live processes
// (not yet seen dead at that time) that hold it; a healthy ring has exactly
// one per partition.
func (log *Log) Owners(at int64) map[int][]Process {
	deadBy := map[Process]bool{}
	for _, s := range log.Signals {
		if s.Kind == KindExit && s.At <= at {
			deadBy[s.Process] = true
		}
	}
	owners := map[int][]Process{}
	for _, p := range log.Processes() {
		if deadBy[p] {
			continue
		}
		for _, part := range log.ActiveAt(p, at) {
			owners[part] = append(owners[part], p)
		}
	}
	return owners
}

func sortedKeys(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

// Window is a stretch of time during which a process may have reconciled
// keys of Partition: from its activate record until its revoked record, or
// until it was seen dead, or (End = MaxInt64) until now.
type Window struct {
	Process
	Partition  int
	Start, End int64
}

func (w Window) String() string {
	end := "∞"
	if w.End != math.MaxInt64 {
		end = fmt.Sprint(w.End)
	}
	return fmt.Sprintf("{%s partition=%d active %d..%s}", w.Process, w.Partition, w.Start, end)
}

// Windows returns every process's active windows, by partition. A revoke
// without its revoked record (a drain that failed) keeps the window open.
func (log *Log) Windows() map[int][]Window {
	deaths := map[Process]int64{}
	for _, s := range log.Signals {
		if s.Kind == KindExit {
			deaths[s.Process] = s.At
		}
	}
	type procPart struct {
		Process
		part int
	}
	open := map[procPart]int64{}
	out := map[int][]Window{}
	for _, r := range log.Ring {
		for _, part := range r.Partitions {
			id := procPart{r.Process, part}
			start, isOpen := open[id]
			switch {
			case r.Kind == KindActivate && !isOpen:
				open[id] = r.At
			case r.Kind == KindRevoked && isOpen:
				out[part] = append(out[part], Window{Process: r.Process, Partition: part, Start: start, End: r.At})
				delete(open, id)
			}
		}
	}
	for id, start := range open {
		end, dead := deaths[id.Process]
		if !dead {
			end = math.MaxInt64
		}
		out[id.part] = append(out[id.part], Window{Process: id.Process, Partition: id.part, Start: start, End: end})
	}
	return out
}

// Moves returns the windows that began at or after since (Unix
// nanoseconds) on a partition whose previous window belonged to another
// replica: the partition moved between replicas, not from one process of a
// replica to its next (as it does when the replica keeps its place on
// leave). Ordered by partition and start.
func (log *Log) Moves(since int64) []Window {
	var out []Window
	for _, ws := range log.Windows() {
		// A partition's windows never overlap (the checker fails on
		// those that do), so their starts order them.
		slices.SortFunc(ws, func(a, b Window) int { return cmp.Compare(a.Start, b.Start) })
		for i := 1; i < len(ws); i++ {
			if ws[i].Start >= since && ws[i].Replica != ws[i-1].Replica {
				out = append(out, ws[i])
			}
		}
	}
	slices.SortFunc(out, func(a, b Window) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Start, b.Start))
	})
	return out
}

// Handoffs returns, for every move of a partition from one process to
// another, how long it was active nowhere: from the old owner's window
// ending (drained, or seen dead) to the new owner's activation. Moves out of
// a window still open are left out; they have not happened.
func (log *Log) Handoffs() []time.Duration {
	var gaps []time.Duration
	for _, ws := range log.Windows() {
		sort.Slice(ws, func(i, j int) bool { return ws[i].Start < ws[j].Start })
		for i := 1; i < len(ws); i++ {
			prev, next := ws[i-1], ws[i]
			if prev.Process == next.Process || prev.End == math.MaxInt64 {
				continue
			}
			gaps = append(gaps, time.Duration(max(next.Start-prev.End, 0)))
		}
	}
	return gaps
}
