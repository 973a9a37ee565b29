package gate

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kshard/kshard/internal/testwait"
)

// drainAsync runs Drain on its own goroutine and returns its result channel.
func drainAsync(ctx context.Context, g *Gate, parts []int, o DrainOptions) <-chan error {
	done := make(chan error, 1)
	go func() { done <- g.Drain(ctx, parts, o) }()
	return done
}

func waitDrain(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Drain did not return")
		return nil
	}
}

func TestDrainWithNothingInFlightRevokesAndReturns(t *testing.T) {
	g := New(3, true)
	cancelled := false
	if err := g.Drain(context.Background(), []int{0, 2}, DrainOptions{Grace: time.Hour, Cancel: func() { cancelled = true }}); err != nil {
		t.Fatal(err)
	}
	if g.Active(0) || !g.Active(1) || g.Active(2) {
		t.Fatalf("active after draining 0 and 2: %v %v %v; want only 1", g.Active(0), g.Active(1), g.Active(2))
	}
	if cancelled {
		t.Fatal("Cancel called with nothing in flight")
	}
}

// A fence (no grace) cancels at once; Drain returns when the last
// reconcile exits, and no admission gets in meanwhile.
func TestDrainWithoutGraceCancelsAtOnce(t *testing.T) {
	g := New(2, true)
	if !g.Enter(1) {
		t.Fatal("Enter failed")
	}
	cancelled := make(chan struct{})
	done := drainAsync(context.Background(), g, []int{1}, DrainOptions{Cancel: func() { close(cancelled) }})
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("Cancel not called without a grace period")
	}
	if g.Enter(1) {
		t.Fatal("a reconcile was admitted while its partition drained")
	}
	select {
	case err := <-done:
		t.Fatalf("Drain returned (%v) with a reconcile in flight", err)
	default:
	}
	g.Exit(1)
	if err := waitDrain(t, done); err != nil {
		t.Fatal(err)
	}
}

// Within the grace period nothing is cancelled; after it, Cancel is.
func TestDrainCancelsAfterTheGracePeriod(t *testing.T) {
	g := New(1, true)
	g.Enter(0)
	var mu sync.Mutex
	var cancelledAt time.Time
	start := time.Now()
	const grace = 50 * time.Millisecond
	done := drainAsync(context.Background(), g, []int{0}, DrainOptions{Grace: grace, Cancel: func() {
		mu.Lock()
		cancelledAt = time.Now()
		mu.Unlock()
		g.Exit(0) // the cancelled reconcile returns
	}})
	if err := waitDrain(t, done); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if cancelledAt.IsZero() || cancelledAt.Sub(start) < grace {
		t.Fatalf("cancelled %v after the drain began; want after the %v grace period", cancelledAt.Sub(start), grace)
	}
}

func TestDrainFailsWhenThePartitionIsActivatedAgain(t *testing.T) {
	g := New(1, true)
	g.Enter(0)
	done := drainAsync(context.Background(), g, []int{0}, DrainOptions{Grace: time.Hour, Cancel: func() {}})
	// Activate wakes the drain (Changed), which must see the partition
	// active again; wait until the drain has revoked it first.
	testwait.True(t, 10*time.Second, "the drain to revoke partition 0", func() bool { return !g.Active(0) })
	g.Activate(0)
	err := waitDrain(t, done)
	if err == nil || !strings.Contains(err.Error(), "activated again") {
		t.Fatalf("Drain: %v; want an error naming the re-activation", err)
	}
	g.Exit(0)
}

// A drain that outlives its context fails, naming the cause and what is in
// flight; the partition stays revoked.
func TestDrainEndsWithItsContext(t *testing.T) {
	g := New(1, true)
	g.Enter(0)
	defer g.Exit(0)
	cause := errors.New("the coordinator stopped")
	ctx, cancel := context.WithCancelCause(context.Background())
	done := drainAsync(ctx, g, []int{0}, DrainOptions{Grace: time.Hour, Cancel: func() {}})
	cancel(cause)
	err := waitDrain(t, done)
	if !errors.Is(err, cause) || !strings.Contains(err.Error(), "1 reconciles") {
		t.Fatalf("Drain: %v; want the cause and the count in flight", err)
	}
	if g.Active(0) {
		t.Fatal("the partition is active again after a failed drain")
	}
}

// Overdue is told at every ReportAfter while the drain waits, first once.
func TestDrainReportsOverdue(t *testing.T) {
	g := New(1, true)
	g.Enter(0)
	var mu sync.Mutex
	var firsts []bool
	done := drainAsync(context.Background(), g, []int{0}, DrainOptions{Grace: time.Hour, Cancel: func() {}, ReportAfter: 5 * time.Millisecond,
		Overdue: func(inFlight int, _ time.Duration, first bool) {
			mu.Lock()
			defer mu.Unlock()
			if inFlight != 1 {
				t.Errorf("Overdue told %d in flight; want 1", inFlight)
			}
			if firsts = append(firsts, first); len(firsts) == 3 {
				g.Exit(0)
			}
		}})
	if err := waitDrain(t, done); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(firsts) != 3 || !firsts[0] || firsts[1] || firsts[2] {
		t.Fatalf("Overdue's first flags %v; want [true false false]", firsts)
	}
}
