package recorder

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// Kinds of records.
const (
	// KindStart and KindEnd bracket one reconcile of Key at generation Gen.
	// A start without an end is a reconcile cut short by the process's death.
	KindStart = "start"
	KindEnd   = "end"

	// KindActivate, KindRevoke and KindRevoked carry ring events: partitions
	// becoming active, starting to be taken away, and taken away.
	KindActivate = "activate"
	KindRevoke   = "revoke"
	KindRevoked  = "revoked"

	// KindWrite is the writer's successful update of Key to Gen; Start is
	// when the request was sent, At when it was acknowledged.
	KindWrite = "write"

	// KindSend is a replica's write of the object it reconciles, recorded
	// by its client transport just before the request goes to the
	// connection (after the manager's lease-validity check, so a refused
	// write leaves no send record). Seq names the reconcile, Gen the
	// generation it saw, Value what it wrote, At when it was sent, Until
	// the reconcile's lease validity and Late whether it had passed then.
	KindSend = "send"

	// KindNotFound is a reconcile's read of Key from its cache that found
	// no object: Start is when the read began, At when it returned. Log.Check
	// reports such a read of an object that existed (see Vanished).
	KindNotFound = "notfound"

	// KindFault is a fault that kept replicas from reconciling from Start
	// until End (an API server outage, a paused or cut-off replica), Value
	// saying which; At is when it was recorded. Log.CheckWithin extends
	// the liveness allowance of the writes it overlaps by its length.
	KindFault = "fault"

	// KindTerm and KindKill are the harness's SIGTERM and SIGKILL of a
	// process (At = when sent); KindExit is when the harness saw it dead.
	KindTerm = "term"
	KindKill = "kill"
	KindExit = "exit"
)

// Process identifies one run of a replica: a restarted replica keeps its
// Replica name and gets a new Incarnation.
type Process struct {
	Replica     string `json:"replica,omitempty"`
	Incarnation string `json:"incarnation,omitempty"`
}

func (p Process) String() string { return p.Replica + "/" + p.Incarnation }

// Record is one line of a recorder file. Times are Unix nanoseconds of the
// machine's wall clock, which every process of a test shares.
type Record struct {
	Kind string `json:"kind"`
	Process
	// Seq pairs a reconcile's end with its start within one process.
	Seq        uint64 `json:"seq,omitempty"`
	Key        string `json:"key,omitempty"`
	Gen        int64  `json:"gen,omitempty"`
	Start      int64  `json:"start,omitempty"`
	End        int64  `json:"end,omitempty"`
	Partitions []int  `json:"partitions,omitempty"`
	At         int64  `json:"at,omitempty"`
	// Error is why a reconcile ended without finishing its work (its
	// context was cancelled by a revoke or shutdown).
	Error string `json:"error,omitempty"`
	// Code is a process's exit code on KindExit (-1: killed by a signal).
	Code int `json:"code,omitempty"`
	// Value, Until and Late describe a KindSend (see there).
	Value string `json:"value,omitempty"`
	Until int64  `json:"until,omitempty"`
	Late  bool   `json:"late,omitempty"`
}

// Writer appends records to one file. Every record is one write(2) on a file
// opened with O_APPEND, so a SIGKILL loses at most the line being written and
// concurrent writers never interleave within a line.
type Writer struct {
	file *os.File
	proc Process
	seq  atomic.Uint64
}

// FileSuffix ends every recorder file's name; Load reads exactly these.
const FileSuffix = ".jsonl"

// Open creates (or appends to) the file of process p in dir.
func Open(dir string, p Process) (*Writer, error) {
	if p.Replica == "" || p.Incarnation == "" {
		return nil, fmt.Errorf("recorder: process needs a replica and an incarnation, got %q", p.String())
	}
	return open(filepath.Join(dir, p.Replica+"-"+p.Incarnation+FileSuffix), p)
}

// OpenNamed creates (or appends to) dir/<name>.jsonl for records that belong
// to no replica process: the harness's and the writer's.
func OpenNamed(dir, name string) (*Writer, error) {
	return open(filepath.Join(dir, name+FileSuffix), Process{})
}

func open(path string, p Process) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("recorder: %w", err)
	}
	return &Writer{file: f, proc: p}, nil
}

// Process is the process this Writer records for.
func (w *Writer) Process() Process { return w.proc }

// Close closes the file.
func (w *Writer) Close() error { return w.file.Close() }

// Append writes r as one line.
func (w *Writer) Append(r Record) error {
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("recorder: %w", err)
	}
	if _, err := w.file.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("recorder: %w", err)
	}
	return nil
}

// Reconcile is a reconcile whose start has been recorded.
type Reconcile struct {
	seq   uint64
	key   string
	gen   int64
	start int64
}

// Started records that a reconcile of key, which observed generation gen,
// began at start. Pass the time taken before the object was read, so the
// recorded interval covers all of the reconcile's work.
func (w *Writer) Started(key string, gen int64, start time.Time) (Reconcile, error) {
	rc := Reconcile{seq: w.seq.Add(1), key: key, gen: gen, start: start.UnixNano()}
	return rc, w.Append(Record{Kind: KindStart, Process: w.proc, Seq: rc.seq, Key: key, Gen: gen, Start: rc.start})
}

// Ended records that rc has returned now; a non-nil failure says its work
// was not done. The end line repeats the whole interval, so it reads on its
// own.
func (w *Writer) Ended(rc Reconcile, failure error) error {
	r := Record{Kind: KindEnd, Process: w.proc, Seq: rc.seq, Key: rc.key, Gen: rc.gen, Start: rc.start, End: time.Now().UnixNano()}
	if failure != nil {
		r.Error = failure.Error()
	}
	return w.Append(r)
}

// NotFound records that a reconcile's cache read of key, begun at start,
// has just found no object.
func (w *Writer) NotFound(key string, start time.Time) error {
	return w.Append(Record{Kind: KindNotFound, Process: w.proc, Key: key, Start: start.UnixNano(), At: time.Now().UnixNano()})
}

// Ring records a ring event (KindActivate, KindRevoke or KindRevoked) for
// partitions, now.
func (w *Writer) Ring(kind string, partitions []int) error {
	return w.Append(Record{Kind: kind, Process: w.proc, Partitions: partitions, At: time.Now().UnixNano()})
}

// Seq returns the sequence number pairing rc's records.
func (rc Reconcile) Seq() uint64 { return rc.seq }

// Sent records that a write of value by reconcile seq of key (which saw
// generation gen) is being sent now, under a lease validity until (zero:
// none); late says the validity had passed by the process's monotonic clock.
func (w *Writer) Sent(seq uint64, key string, gen int64, value string, until time.Time, late bool) error {
	r := Record{Kind: KindSend, Process: w.proc, Seq: seq, Key: key, Gen: gen, Value: value, At: time.Now().UnixNano(), Late: late}
	if !until.IsZero() {
		r.Until = until.UnixNano()
	}
	return w.Append(r)
}
