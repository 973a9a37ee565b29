package controller

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/kshard/kshard/shard"
)

// pausedSource is a ReplayableSource over an in-memory cache of requests.
// Its replay stops after pauseAt requests (once, on its first replay) until
// the test calls resume, and fails its first failures replays.
type pausedSource struct {
	reqs     []Request
	pauseAt  int
	failures int

	mu      sync.Mutex
	replays int
	paused  chan struct{} // closed when the replay reaches pauseAt
	resume  chan struct{} // closed by the test
}

func newPausedSource(reqs []Request, pauseAt int) *pausedSource {
	return &pausedSource{reqs: reqs, pauseAt: pauseAt, paused: make(chan struct{}), resume: make(chan struct{})}
}

func (s *pausedSource) Start(context.Context, Queue) error { return nil }

func (s *pausedSource) Replay(ctx context.Context, q Queue) error {
	s.mu.Lock()
	s.replays++
	n := s.replays
	s.mu.Unlock()
	if n <= s.failures {
		return errors.New("cache unavailable")
	}
	for i, r := range s.reqs {
		if i == s.pauseAt && n == s.failures+1 {
			close(s.paused)
			select {
			case <-s.resume:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		q.Add(r)
	}
	return nil
}

// replayAsync runs h.c.Replay(set) and returns its result channel.
func replayAsync(h *harness, set shard.PartitionSet) <-chan error {
	done := make(chan error, 1)
	go func() { done <- h.c.Replay(context.Background(), set) }()
	return done
}

func await(t *testing.T, what string, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		return nil
	}
}

// A partition revoked while its replay runs gets none of the requests the
// replay produces after the revoke; the other partitions get all of theirs,
// and Admit does not wait for the running replay.
func TestReplayRefusesPartitionRevokedDuringIt(t *testing.T) {
	in, _ := keysIn(testPartitioner, set(1, 3), 400)
	src := newPausedSource(in, len(in)/2)
	calls := newCounter()
	h := startController(t, ReconcilerFunc(func(_ context.Context, r Request) (Result, error) {
		calls.inc(r)
		return Result{}, nil
	}), Options{Partitioner: testPartitioner, StartInactive: true}, src)

	if err := h.c.Admit(set(1, 3)); err != nil {
		t.Fatal(err)
	}
	done := replayAsync(h, set(1, 3))
	<-src.paused
	if err := h.c.Revoke(context.Background(), set(3), GracePeriod(0)); err != nil {
		t.Fatal(err)
	}
	// Admission is not held up by the paused replay.
	if err := h.c.Admit(set(5)); err != nil {
		t.Fatal(err)
	}
	if !h.c.ActivePartitions().Equal(set(1, 5)) {
		t.Fatalf("active = %s, want {1,5}", h.c.ActivePartitions())
	}
	close(src.resume)
	if err := await(t, "the replay", done); err != nil {
		t.Fatal(err)
	}

	var wantP1, lateP3 int
	for i, r := range in {
		switch {
		case partitionOf(r) == 1:
			wantP1++
		case i >= len(in)/2:
			lateP3++
		}
	}
	eventually(t, "partition 1's requests reconciled", func() bool {
		n := 0
		for _, r := range in {
			if partitionOf(r) == 1 {
				n += calls.get(r)
			}
		}
		return n == wantP1
	})
	for _, r := range in[len(in)/2:] {
		if partitionOf(r) == 3 && calls.get(r) != 0 {
			t.Fatalf("%s of partition 3 reconciled after partition 3 was revoked", r)
		}
	}
	if got := h.decision("foreign"); got != float64(lateP3) {
		t.Fatalf("gate refused %v requests, want the %d of partition 3 replayed after its revoke", got, lateP3)
	}
}

// A failed replay leaves its partitions pending: the next Replay replays
// them, and a Replay of partitions not pending enqueues nothing.
func TestFailedReplayIsCompletedByTheNext(t *testing.T) {
	in, _ := keysIn(testPartitioner, set(2), 50)
	src := newPausedSource(in, -1)
	src.failures = 1
	calls := newCounter()
	h := startController(t, ReconcilerFunc(func(_ context.Context, r Request) (Result, error) {
		calls.inc(r)
		return Result{}, nil
	}), Options{Partitioner: testPartitioner, StartInactive: true}, src)

	if err := h.c.Admit(set(2)); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Replay(context.Background(), set(2)); err == nil {
		t.Fatal("the first replay should have failed")
	}
	if got := h.decision("admitted"); got != 0 {
		t.Fatalf("%v requests admitted by a failed replay, want 0", got)
	}
	if err := h.c.Replay(context.Background(), set(2)); err != nil {
		t.Fatal(err)
	}
	if got := h.decision("admitted"); got != float64(len(in)) {
		t.Fatalf("%v requests admitted, want %d", got, len(in))
	}
	if err := h.c.Replay(context.Background(), set(2)); err != nil {
		t.Fatal(err)
	}
	if got := h.decision("admitted"); got != float64(len(in)) {
		t.Fatalf("a replay of a partition already replayed admitted %v requests in all, want still %d", got, len(in))
	}
	eventually(t, "every request reconciled once", func() bool { return calls.total() == len(in) })
}

// A partition revoked and admitted again while a replay of it runs may
// have lost requests meanwhile (the gate refused live events, workers
// dropped its queued requests): it is pending again, and the next Replay
// gives it all of them.
func TestPartitionReadmittedDuringReplayIsReplayedAgain(t *testing.T) {
	in, _ := keysIn(testPartitioner, set(4), 100)
	src := newPausedSource(in, len(in)/2)
	h := startController(t, ReconcilerFunc(noop), Options{Partitioner: testPartitioner, StartInactive: true}, src)

	if err := h.c.Admit(set(4)); err != nil {
		t.Fatal(err)
	}
	done := replayAsync(h, set(4))
	<-src.paused
	if err := h.c.Revoke(context.Background(), set(4), GracePeriod(0)); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Admit(set(4)); err != nil {
		t.Fatal(err)
	}
	close(src.resume)
	if err := await(t, "the replay", done); err != nil {
		t.Fatal(err)
	}
	if got := h.decision("admitted"); got != float64(len(in)) {
		t.Fatalf("%v requests admitted by the first replay, want %d", got, len(in))
	}
	if err := h.c.Replay(context.Background(), set(4)); err != nil {
		t.Fatal(err)
	}
	if got := h.decision("admitted"); got != float64(2*len(in)) {
		t.Fatalf("%v requests admitted in all, want %d: the partition admitted again is replayed again", got, 2*len(in))
	}
}
