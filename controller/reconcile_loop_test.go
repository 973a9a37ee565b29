package controller

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/kshard/kshard/internal/testwait"
)

func TestSuccessIsForgottenAndCounted(t *testing.T) {
	calls := newCounter()
	rl := newRecordingLimiter()
	h := startController(t, ReconcilerFunc(func(_ context.Context, r Request) (Result, error) {
		calls.inc(r)
		return Result{}, nil
	}), Options{RateLimiter: rl})
	r := req("default", "a")
	h.src.Add(r)
	testwait.True(t, 10*time.Second, "one success", func() bool { return h.result("success") == 1 })
	if whens, forgets := rl.counts(r); whens != 0 || forgets != 1 {
		t.Fatalf("rate limiter: When %d times, Forget %d times; want 0 and 1", whens, forgets)
	}
	if got := calls.get(r); got != 1 {
		t.Fatalf("reconciled %d times, want 1", got)
	}
}

func TestErrorIsRetriedWithRateLimiting(t *testing.T) {
	calls := newCounter()
	rl := newRecordingLimiter()
	h := startController(t, ReconcilerFunc(func(_ context.Context, r Request) (Result, error) {
		if calls.inc(r) <= 2 {
			return Result{}, errors.New("transient")
		}
		return Result{}, nil
	}), Options{RateLimiter: rl})
	r := req("default", "flaky")
	h.src.Add(r)
	testwait.True(t, 10*time.Second, "success after two errors", func() bool { return h.result("success") == 1 })
	if got := calls.get(r); got != 3 {
		t.Fatalf("reconciled %d times, want 3 (two failures, one success)", got)
	}
	if whens, forgets := rl.counts(r); whens != 2 || forgets != 1 {
		t.Fatalf("rate limiter: When %d, Forget %d; want 2 rate-limited retries then 1 Forget", whens, forgets)
	}
	if got := h.result("error"); got != 2 {
		t.Fatalf("reconcile_total{result=error} = %v, want 2", got)
	}
	if got := h.metric("controller_runtime_reconcile_errors_total", nil); got != 2 {
		t.Fatalf("reconcile_errors_total = %v, want 2", got)
	}
}

func TestTerminalErrorIsRecordedNotRetried(t *testing.T) {
	calls := newCounter()
	rl := newRecordingLimiter()
	h := startController(t, ReconcilerFunc(func(_ context.Context, r Request) (Result, error) {
		calls.inc(r)
		return Result{}, TerminalError(errors.New("bad spec"))
	}), Options{RateLimiter: rl})
	r := req("default", "broken")
	h.src.Add(r)
	testwait.True(t, 10*time.Second, "terminal error recorded", func() bool {
		return h.metric("controller_runtime_terminal_reconcile_errors_total", nil) == 1
	})
	// Not retried: the rate limiter was never asked for a retry delay and
	// the request was forgotten.
	if whens, forgets := rl.counts(r); whens != 0 || forgets != 1 {
		t.Fatalf("rate limiter: When %d, Forget %d; want 0 and 1", whens, forgets)
	}
	if h.result("error") != 1 || h.metric("controller_runtime_reconcile_errors_total", nil) != 1 {
		t.Fatal("a terminal error must count as an error in reconcile_total and reconcile_errors_total")
	}
	if got := calls.get(r); got != 1 {
		t.Fatalf("reconciled %d times, want 1", got)
	}
}

func TestTerminalErrorDetection(t *testing.T) {
	base := errors.New("x")
	if TerminalError(nil) != nil {
		t.Fatal("TerminalError(nil) must be nil")
	}
	wrapped := errors.Join(errors.New("context"), TerminalError(base))
	if !IsTerminal(wrapped) || !errors.Is(wrapped, base) {
		t.Fatal("a wrapped terminal error must be detected and keep its cause")
	}
	if IsTerminal(base) {
		t.Fatal("a plain error is not terminal")
	}
}

func TestRequeueAfter(t *testing.T) {
	calls := newCounter()
	rl := newRecordingLimiter()
	var first time.Time
	var second atomic.Int64
	h := startController(t, ReconcilerFunc(func(_ context.Context, r Request) (Result, error) {
		if calls.inc(r) == 1 {
			first = time.Now()
			return Result{RequeueAfter: 30 * time.Millisecond}, nil
		}
		second.Store(int64(time.Since(first)))
		return Result{}, nil
	}), Options{RateLimiter: rl})
	r := req("default", "later")
	h.src.Add(r)
	testwait.True(t, 10*time.Second, "second reconcile", func() bool { return calls.get(r) == 2 })
	if d := time.Duration(second.Load()); d < 30*time.Millisecond {
		t.Fatalf("requeued after %s, want at least 30ms", d)
	}
	testwait.True(t, 10*time.Second, "counted", func() bool { return h.result("success") == 1 })
	if h.result("requeue_after") != 1 {
		t.Fatalf("reconcile_total{result=requeue_after} = %v, want 1", h.result("requeue_after"))
	}
	if whens, forgets := rl.counts(r); whens != 0 || forgets != 2 {
		t.Fatalf("rate limiter: When %d, Forget %d; want 0 (RequeueAfter is not rate limited) and 2", whens, forgets)
	}
}

func TestRequeueIsRateLimited(t *testing.T) {
	calls := newCounter()
	rl := newRecordingLimiter()
	h := startController(t, ReconcilerFunc(func(_ context.Context, r Request) (Result, error) {
		return Result{Requeue: calls.inc(r) == 1}, nil
	}), Options{RateLimiter: rl})
	r := req("", "cluster-scoped")
	h.src.Add(r)
	testwait.True(t, 10*time.Second, "requeued then succeeded", func() bool { return h.result("success") == 1 })
	if h.result("requeue") != 1 {
		t.Fatalf("reconcile_total{result=requeue} = %v, want 1", h.result("requeue"))
	}
	if whens, _ := rl.counts(r); whens != 1 {
		t.Fatalf("When called %d times, want 1", whens)
	}
}

func TestPanicIsRecoveredCountedAndRetried(t *testing.T) {
	calls := newCounter()
	rl := newRecordingLimiter()
	h := startController(t, ReconcilerFunc(func(_ context.Context, r Request) (Result, error) {
		if calls.inc(r) == 1 {
			panic("boom")
		}
		return Result{}, nil
	}), Options{RateLimiter: rl})
	r := req("default", "panicky")
	h.src.Add(r)
	testwait.True(t, 10*time.Second, "retried after the panic", func() bool { return h.result("success") == 1 })
	if got := h.metric("controller_runtime_reconcile_panics_total", nil); got != 1 {
		t.Fatalf("reconcile_panics_total = %v, want 1", got)
	}
	if h.result("error") != 1 {
		t.Fatal("a recovered panic must count as an error")
	}
	if h.c.InFlight() != 0 {
		t.Fatal("a panicking reconcile left an in-flight count behind")
	}
}

func TestPanicPropagatesWhenRecoveryIsOff(t *testing.T) {
	off := false
	ci, err := New("nopanic", ReconcilerFunc(func(context.Context, Request) (Result, error) { panic("boom") }),
		Options{RecoverPanic: &off, Registerer: newRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	c := ci.(*controller)
	defer func() {
		if r := recover(); r != "boom" {
			t.Fatalf("recovered %v, want the reconciler's panic", r)
		}
	}()
	_, _ = c.reconcile(context.Background(), req("a", "b"))
	t.Fatal("reconcile returned instead of panicking")
}

func TestSameKeyNeverRunsConcurrently(t *testing.T) {
	var mu sync.Mutex
	running := map[Request]int{}
	maxPerKey, maxTotal, total := 0, 0, 0
	release := make(chan struct{})
	calls := newCounter()
	h := startController(t, ReconcilerFunc(func(_ context.Context, r Request) (Result, error) {
		mu.Lock()
		running[r]++
		total++
		maxPerKey, maxTotal = max(maxPerKey, running[r]), max(maxTotal, total)
		mu.Unlock()
		if calls.inc(r) == 1 {
			<-release // hold the first reconcile of each key
		}
		mu.Lock()
		running[r]--
		total--
		mu.Unlock()
		return Result{}, nil
	}), Options{MaxConcurrentReconciles: 4})
	a, b := req("ns", "a"), req("ns", "b")
	h.src.Add(a)
	h.src.Add(b)
	testwait.True(t, 10*time.Second, "both keys in flight", func() bool { return h.c.InFlight() == 2 })
	for range 50 {
		h.src.Add(a) // marks a dirty while it is processing
	}
	close(release)
	testwait.True(t, 10*time.Second, "the re-added key reconciled again", func() bool { return calls.get(a) == 2 })
	testwait.True(t, 10*time.Second, "idle", func() bool { return h.c.InFlight() == 0 })
	mu.Lock()
	defer mu.Unlock()
	if maxPerKey != 1 {
		t.Fatalf("a key ran %d times at once", maxPerKey)
	}
	if maxTotal < 2 {
		t.Fatalf("at most %d reconciles ran at once with 4 workers and 2 keys", maxTotal)
	}
	if got := calls.get(a); got != 2 {
		t.Fatalf("key a reconciled %d times; 50 adds while processing must collapse into one", got)
	}
}

func TestReconcileLoggerAndID(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		buf.WriteString(args + "\n")
	}, funcr.Options{})
	ids := make(chan string, 2)
	h := startController(t, ReconcilerFunc(func(ctx context.Context, r Request) (Result, error) {
		LoggerFrom(ctx).Info("hello")
		ids <- string(ReconcileIDFrom(ctx))
		return Result{}, nil
	}), Options{Logger: logger})
	h.src.Add(req("team-a", "cm"))
	h.src.Add(req("team-b", "cm"))
	id1, id2 := <-ids, <-ids
	if id1 == "" || id1 == id2 {
		t.Fatalf("reconcile IDs %q and %q: want non-empty and distinct", id1, id2)
	}
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	for _, want := range []string{`"controller"="test"`, `"namespace"="team-a"`, `"name"="cm"`, `"reconcileID"="` + id1 + `"`} {
		if !strings.Contains(out, want) {
			t.Errorf("reconcile log lacks %s:\n%s", want, out)
		}
	}
	if ReconcileIDFrom(context.Background()) != "" {
		t.Fatal("ReconcileIDFrom outside a reconcile must be empty")
	}
}

func TestReconcileTimeout(t *testing.T) {
	errs := make(chan error, 1)
	startController(t, ReconcilerFunc(func(ctx context.Context, r Request) (Result, error) {
		if _, ok := ctx.Deadline(); !ok {
			errs <- errors.New("no deadline on the reconcile context")
			return Result{}, nil
		}
		<-ctx.Done()
		errs <- ctx.Err()
		return Result{}, TerminalError(ctx.Err())
	}), Options{ReconcileTimeout: 20 * time.Millisecond}).src.Add(req("a", "b"))
	if err := <-errs; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("reconcile context ended with %v, want DeadlineExceeded", err)
	}
}

func TestStartTwiceAndWatchAfterStop(t *testing.T) {
	ci, err := New("twice", ReconcilerFunc(func(context.Context, Request) (Result, error) { return Result{}, nil }),
		Options{Registerer: newRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ci.Start(ctx) }()
	src := &queueSource{}
	if err := ci.Watch(src); err != nil {
		t.Fatalf("Watch after Start: %v", err)
	}
	<-src.readyCh() // started by Watch, since the controller runs
	if err := ci.Start(ctx); err == nil || !strings.Contains(err.Error(), "more than once") {
		t.Fatalf("second Start: %v, want an error", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := ci.Watch(&queueSource{}); err == nil {
		t.Fatal("Watch after the controller stopped must fail")
	}
}

func TestSourceStartErrorFailsStart(t *testing.T) {
	ci, _ := New("badsource", ReconcilerFunc(func(context.Context, Request) (Result, error) { return Result{}, nil }),
		Options{Registerer: newRegistry()})
	_ = ci.Watch(Channel(nil, EnqueueRequestForObject{}))
	err := ci.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "channel is nil") {
		t.Fatalf("Start: %v, want the source's error", err)
	}
}
