package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kshard/kshard/internal/testwait"
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

	if err := h.c.Admit(context.Background(), set(1, 3)); err != nil {
		t.Fatal(err)
	}
	done := replayAsync(h, set(1, 3))
	<-src.paused
	if err := h.c.Revoke(context.Background(), set(3), true); err != nil {
		t.Fatal(err)
	}
	// Admission is not held up by the paused replay.
	if err := h.c.Admit(context.Background(), set(5)); err != nil {
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
	testwait.True(t, 10*time.Second, "partition 1's requests reconciled", func() bool {
		n := 0
		for _, r := range in {
			if partitionOf(r) == 1 {
				n += calls.get(r)
			}
		}
		return n == wantP1
	})
	p3, reconciledP3 := 0, 0
	for i, r := range in {
		if partitionOf(r) != 3 {
			continue
		}
		p3++
		reconciledP3 += calls.get(r)
		if i >= len(in)/2 && calls.get(r) != 0 {
			t.Fatalf("%s of partition 3 reconciled after partition 3 was revoked", r)
		}
	}
	// Each request of partition 3 was reconciled (fed to the queue before
	// the revoke) or refused: by the gate when fed, or when dequeued.
	refused := h.decision("foreign") + h.decision("inactive")
	if float64(reconciledP3)+refused != float64(p3) || refused < float64(lateP3) {
		t.Fatalf("partition 3: %d reconciled, %v refused; want %d in all, at least the %d replayed after its revoke refused", reconciledP3, refused, p3, lateP3)
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

	if err := h.c.Admit(context.Background(), set(2)); err != nil {
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
	testwait.True(t, 10*time.Second, "the replay's requests reconciled", func() bool { return calls.total() == len(in) })
	if got := h.decision("admitted"); got != float64(len(in)) {
		t.Fatalf("%v requests admitted, want %d", got, len(in))
	}
	if err := h.c.Replay(context.Background(), set(2)); err != nil {
		t.Fatal(err)
	}
	if got := h.c.backlog.len(); got != 0 {
		t.Fatalf("a replay of a partition already replayed left %d requests to feed, want none", got)
	}
	if got := h.decision("admitted"); got != float64(len(in)) {
		t.Fatalf("a replay of a partition already replayed admitted %v requests in all, want still %d", got, len(in))
	}
	testwait.True(t, 10*time.Second, "every request reconciled once", func() bool { return calls.total() == len(in) })
}

// A partition revoked and admitted again while a replay of it runs may
// have lost requests meanwhile (the gate refused live events and requests
// fed from the replay backlog, workers dropped its queued requests): it is
// pending again, and the next Replay gives it all of them.
func TestPartitionReadmittedDuringReplayIsReplayedAgain(t *testing.T) {
	in, _ := keysIn(testPartitioner, set(4), 100)
	src := newPausedSource(in, len(in)/2)
	h := startController(t, ReconcilerFunc(noop), Options{Partitioner: testPartitioner, StartInactive: true}, src)

	if err := h.c.Admit(context.Background(), set(4)); err != nil {
		t.Fatal(err)
	}
	done := replayAsync(h, set(4))
	<-src.paused
	if err := h.c.Revoke(context.Background(), set(4), true); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Admit(context.Background(), set(4)); err != nil {
		t.Fatal(err)
	}
	close(src.resume)
	if err := await(t, "the replay", done); err != nil {
		t.Fatal(err)
	}
	// Every request of the first replay reaches the gate once: admitted,
	// or refused if the workers fed it from the backlog while the
	// partition was revoked.
	testwait.True(t, 10*time.Second, "the first replay's requests through the gate", func() bool {
		return h.c.backlog.len() == 0 && h.decision("admitted")+h.decision("foreign") == float64(len(in))
	})
	first := h.decision("admitted")
	if err := h.c.Replay(context.Background(), set(4)); err != nil {
		t.Fatal(err)
	}
	testwait.True(t, 10*time.Second, "the second replay's requests admitted", func() bool { return h.decision("admitted") >= first+float64(len(in)) })
	if got := h.decision("admitted"); got != first+float64(len(in)) {
		t.Fatalf("%v requests admitted by the second replay, want %d: the partition admitted again is replayed again", got-first, len(in))
	}
}

// A replay's requests are fed to the queue a few at a time: a live event
// that arrives behind a large replay is reconciled after at most feedDepth
// of them, not after all.
func TestLiveEventsDoNotWaitBehindAReplay(t *testing.T) {
	in, _ := keysIn(testPartitioner, set(2), 500)
	src := newPausedSource(in, -1)
	var (
		mu    sync.Mutex
		order []Request
	)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	h := startController(t, ReconcilerFunc(func(ctx context.Context, r Request) (Result, error) {
		mu.Lock()
		order = append(order, r)
		mu.Unlock()
		select {
		case <-release:
		case <-ctx.Done():
		}
		return Result{}, nil
	}), Options{Partitioner: testPartitioner, StartInactive: true}, src)

	if err := h.c.Activate(context.Background(), set(2)); err != nil {
		t.Fatal(err)
	}
	if got := h.c.backlog.len(); got < len(in)-h.c.feedDepth()-1 {
		t.Fatalf("replay backlog %d after Activate; want the %d cached requests less the few queued", got, len(in))
	}
	var live Request // a key of partition 2 not in the cache
	for i := 0; ; i++ {
		if r := req("live", fmt.Sprintf("obj-%d", i)); partitionOf(r) == 2 {
			live = r
			break
		}
	}
	h.src.Add(live)
	for range 2*h.c.feedDepth() + 2 {
		release <- struct{}{}
	}
	mu.Lock()
	defer mu.Unlock()
	at := slices.Index(order, live)
	if at < 0 || at > h.c.feedDepth()+1 {
		t.Fatalf("the live event was reconciled at position %d of %d (want within the first %d): it waited behind the replay", at, len(order), h.c.feedDepth()+2)
	}
}

// A sustained overload of live events does not hold a replay back: with the
// queue kept full by live keys that queue themselves again, the backlog still
// gets one in every replayShare requests the workers finish once the queue
// has been full for overloadAfter.
func TestReplayGetsItsShareUnderOverload(t *testing.T) {
	replayed, _ := keysIn(testPartitioner, set(2), 40)
	isLive := map[Request]bool{}
	var live []Request // keys of partition 1, not cached
	for i := 0; len(live) < 10; i++ {
		if r := req("live", fmt.Sprintf("obj-%d", i)); partitionOf(r) == 1 {
			live = append(live, r)
			isLive[r] = true
		}
	}
	var (
		mu                 sync.Mutex
		liveRuns           int
		replayedDone       = map[Request]bool{}
		liveRunsAtActivate int
		liveRunsAtDone     int
		requeue            func(Request)
	)
	h := startController(t, ReconcilerFunc(func(ctx context.Context, r Request) (Result, error) {
		mu.Lock()
		defer mu.Unlock()
		if isLive[r] {
			liveRuns++
			requeue(r) // queued again once done: the queue never runs low
			return Result{}, nil
		}
		replayedDone[r] = true
		if len(replayedDone) == len(replayed) {
			liveRunsAtDone = liveRuns
		}
		return Result{}, nil
	}), Options{Partitioner: testPartitioner, StartInactive: true}, newPausedSource(replayed, -1))
	mu.Lock()
	requeue = h.src.Add
	mu.Unlock()

	if err := h.c.Activate(context.Background(), set(1)); err != nil {
		t.Fatal(err)
	}
	for _, r := range live {
		h.src.Add(r)
	}
	testwait.True(t, 10*time.Second, "the live keys cycling", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return liveRuns > 5*len(live)
	})
	if got := h.c.events.queue.Len(); got < h.c.feedDepth() {
		t.Fatalf("queue holds %d requests; the test needs it full (≥ %d)", got, h.c.feedDepth())
	}
	mu.Lock()
	liveRunsAtActivate = liveRuns
	mu.Unlock()
	if err := h.c.Activate(context.Background(), set(2)); err != nil {
		t.Fatal(err)
	}
	testwait.True(t, 10*time.Second, "every replayed request reconciled while live events keep the queue full", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(replayedDone) == len(replayed)
	})
	mu.Lock()
	defer mu.Unlock()
	beside := liveRunsAtDone - liveRunsAtActivate
	if beside < len(replayed) {
		t.Fatalf("only %d live reconciles ran beside the replay of %d: the queue was not kept full", beside, len(replayed))
	}
	t.Logf("replay of %d drained beside %d live reconciles (its share of one in %d starts once the queue has been full for %v)", len(replayed), beside, replayShare, overloadAfter)
}

// Requests the gate refused while their partition was inactive (updates
// that arrived between the old owner's revoke and this activation) are
// replayed before the rest of the cache, and only for the partitions
// activated.
func TestRecentlyRefusedRequestsAreReplayedFirst(t *testing.T) {
	in, _ := keysIn(testPartitioner, set(2), 300)
	other, _ := keysIn(testPartitioner, set(3), 1)
	var (
		mu    sync.Mutex
		order []Request
	)
	h := startController(t, ReconcilerFunc(func(ctx context.Context, r Request) (Result, error) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, r)
		return Result{}, nil
	}), Options{Partitioner: testPartitioner, StartInactive: true}, newPausedSource(in, -1))

	late := in[len(in)-1] // the last in cache order
	h.src.Add(late)
	h.src.Add(other[0])
	if err := h.c.Activate(context.Background(), set(2)); err != nil {
		t.Fatal(err)
	}
	testwait.True(t, 10*time.Second, "every cached request of partition 2 reconciled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) >= len(in)
	})
	mu.Lock()
	defer mu.Unlock()
	if order[0] != late {
		t.Fatalf("first reconcile after the activation: %v; want %v, refused before it and last in cache order (at %d)", order[0], late, slices.Index(order, late))
	}
	if n := len(order); n != len(in) {
		t.Fatalf("%d reconciles for %d cached requests: the refused one was replayed twice, or partition 3's with it", n, len(in))
	}
	if slices.Contains(order, other[0]) {
		t.Fatalf("%v of partition 3, never activated, was reconciled", other[0])
	}
}

// The ring of refused requests keeps the latest refusedRemembered, oldest
// first.
func TestRefusedRequestsKeepsTheLatest(t *testing.T) {
	var r refusedRequests
	all := func(Request) bool { return true }
	if got := r.in(all); len(got) != 0 {
		t.Fatalf("empty ring returned %v", got)
	}
	for i := range refusedRemembered + 10 {
		r.add(req("ns", strconv.Itoa(i)))
	}
	got := r.in(all)
	if len(got) != refusedRemembered || got[0] != req("ns", "10") || got[len(got)-1] != req("ns", strconv.Itoa(refusedRemembered+9)) {
		t.Fatalf("ring holds %d requests from %v to %v; want the latest %d, oldest first", len(got), got[0], got[len(got)-1], refusedRemembered)
	}
	even := r.in(func(q Request) bool { n, _ := strconv.Atoi(q.Name); return n%2 == 0 })
	if len(even) != refusedRemembered/2 || even[0] != req("ns", "10") {
		t.Fatalf("filtered: %d requests starting at %v", len(even), even[0])
	}
}

// The backlog takes its share only once the queue has stayed full for
// overloadAfter: a shorter burst of live events keeps the replay behind
// them, and a feed (the queue ran low) starts the wait again.
func TestReplayBacklogShareWaitsForASustainedOverload(t *testing.T) {
	var b replayBacklog
	for i := range 3 {
		b.push(req("ns", strconv.Itoa(i)))
	}
	t0 := time.Unix(1000, 0)
	for i := range 10 * replayShare {
		if _, _, ok := b.popOverdue(t0.Add(time.Duration(i) * time.Millisecond)); ok {
			t.Fatalf("overdue feed %d ms into a full queue; want none before %v", i, overloadAfter)
		}
	}
	later := t0.Add(overloadAfter)
	got, left, ok := b.popOverdue(later)
	if !ok || got != req("ns", "0") || left != 2 {
		t.Fatalf("after %v of a full queue: popOverdue = %v, %d left, %v; want the oldest, 2 left", overloadAfter, got, left, ok)
	}
	for i := 1; i < replayShare; i++ {
		if _, _, ok := b.popOverdue(later); ok {
			t.Fatalf("overdue feed %d of %d after the last one; want one in %d", i, replayShare, replayShare)
		}
	}
	if _, _, ok := b.popOverdue(later); !ok {
		t.Fatalf("no overdue feed after %d finished requests", replayShare)
	}
	if _, _, ok := b.pop(); !ok { // the queue ran low: the last request
		t.Fatal("pop found the backlog empty")
	}
	b.push(req("ns", "3"))
	if _, _, ok := b.popOverdue(later.Add(time.Millisecond)); ok {
		t.Fatal("overdue feed right after the queue ran low")
	}
}

// Requests the replay backlog feeds to a closed gate (a partition revoked
// during its replay) are not remembered as refused: they come from the
// cache, and would otherwise push the live refusals out of the ring and go
// first at the next activation.
func TestBacklogRefusalsAreNotRemembered(t *testing.T) {
	in, _ := keysIn(testPartitioner, set(2), 50)
	h := startController(t, ReconcilerFunc(noop), Options{Partitioner: testPartitioner, StartInactive: true})
	for _, r := range in {
		h.c.backlog.push(r)
	}
	h.c.feedReplay(h.c.events, false)
	if got := h.c.backlog.len(); got != 0 {
		t.Fatalf("backlog holds %d after feeding a closed gate, want 0", got)
	}
	if got := h.c.refused.in(func(Request) bool { return true }); len(got) != 0 {
		t.Fatalf("%d backlog requests remembered as refused, want none", len(got))
	}
	live, _ := keysIn(testPartitioner, set(3), 1)
	h.src.Add(live[0])
	if got := h.c.refused.in(func(Request) bool { return true }); len(got) != 1 || got[0] != live[0] {
		t.Fatalf("after a live refusal the ring holds %v, want only %v", got, live[0])
	}
}

// The backlog's length is reported under its lock: however pushes and
// pops of several goroutines interleave, the last report is the final
// length (reported after the lock, a slower feeder's older figure could
// land last and show a backlog over an empty one for good).
func TestReplayBacklogReportsItsLengthInOrder(t *testing.T) {
	var last atomic.Int64
	reports := 0
	b := replayBacklog{}
	b.report = func(left int) { reports++; last.Store(int64(left)) } // under b.mu
	const feeders, each = 4, 500
	var wg sync.WaitGroup
	for f := range feeders {
		wg.Go(func() {
			for i := range each {
				b.push(req("ns", fmt.Sprintf("%d-%d", f, i)))
			}
		})
		wg.Go(func() {
			for popped := 0; popped < each; {
				if _, _, ok := b.pop(); ok {
					popped++
				}
			}
		})
	}
	wg.Wait()
	if n := b.len(); n != 0 {
		t.Fatalf("backlog holds %d after every push was popped", n)
	}
	if got := last.Load(); got != 0 || reports != 2*feeders*each {
		t.Fatalf("last report %d after %d reports, want 0 after %d (one per push and per pop)", got, reports, 2*feeders*each)
	}
}
