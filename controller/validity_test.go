package controller

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// validityClock is a LeaseValidity a test moves.
type validityClock struct{ until atomic.Pointer[time.Time] }

func (v *validityClock) set(t time.Time) { v.until.Store(&t) }

func (v *validityClock) get() time.Time { return *v.until.Load() }

func TestWorkerRefusesToStartOnceValidityPassed(t *testing.T) {
	var v validityClock
	v.set(time.Now().Add(-time.Millisecond)) // passed: as after a pause
	calls := newCounter()
	h := startController(t, ReconcilerFunc(func(_ context.Context, r Request) (Result, error) {
		calls.inc(r)
		return Result{}, nil
	}), Options{LeaseValidity: v.get})
	r := req("default", "a")
	h.src.Add(r)
	eventually(t, "a refusal", func() bool { return h.metric("kshard_reconcile_refused_total", nil) >= 1 })
	if got := calls.get(r); got != 0 {
		t.Fatalf("reconciled %d times while the lease validity had passed, want 0", got)
	}
	if got := h.result("success") + h.result("error"); got != 0 {
		t.Fatalf("reconcile_total counted %v results for a refused reconcile, want 0", got)
	}
	// Re-validated: the request was requeued, not dropped.
	v.set(time.Now().Add(time.Hour))
	eventually(t, "the reconcile after re-validation", func() bool { return calls.get(r) == 1 })
}

func TestReconcileContextCarriesValidityAsDeadline(t *testing.T) {
	until := time.Now().Add(time.Hour)
	var v validityClock
	v.set(until)
	type seen struct {
		deadline, carried time.Time
		hasDeadline, ok   bool
	}
	got := make(chan seen, 1)
	h := startController(t, ReconcilerFunc(func(ctx context.Context, _ Request) (Result, error) {
		var s seen
		s.deadline, s.hasDeadline = ctx.Deadline()
		s.carried, s.ok = ValidUntil(ctx)
		got <- s
		return Result{}, nil
	}), Options{LeaseValidity: v.get, ReconcileTimeout: 2 * time.Hour})
	h.src.Add(req("default", "a"))
	s := <-got
	if !s.hasDeadline || !s.deadline.Equal(until) {
		t.Errorf("reconcile context deadline = %v (set %v), want the lease validity %v", s.deadline, s.hasDeadline, until)
	}
	if !s.ok || !s.carried.Equal(until) {
		t.Errorf("ValidUntil(reconcile context) = %v, %v; want %v, true", s.carried, s.ok, until)
	}
}

func TestReconcileContextEndsWithErrLeaseExpired(t *testing.T) {
	var v validityClock
	v.set(time.Now().Add(50 * time.Millisecond))
	cause := make(chan error, 1)
	h := startController(t, ReconcilerFunc(func(ctx context.Context, _ Request) (Result, error) {
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return Result{}, nil
	}), Options{LeaseValidity: v.get})
	h.src.Add(req("default", "a"))
	if err := <-cause; !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("context cause = %v, want ErrLeaseExpired", err)
	}
}

func TestNoValidityWithoutLease(t *testing.T) {
	got := make(chan bool, 1)
	h := startController(t, ReconcilerFunc(func(ctx context.Context, _ Request) (Result, error) {
		_, ok := ValidUntil(ctx)
		_, hasDeadline := ctx.Deadline()
		got <- ok || hasDeadline
		return Result{}, nil
	}), Options{})
	h.src.Add(req("default", "a"))
	if <-got {
		t.Fatal("a controller without LeaseValidity gave its reconcile a validity or deadline")
	}
}

func TestLeaseValid(t *testing.T) {
	now := time.Now()
	if !LeaseValid(context.Background(), now) {
		t.Error("a context without validity must be valid")
	}
	ctx := WithValidUntil(context.Background(), now)
	if LeaseValid(ctx, now) {
		t.Error("valid at the validity's own instant; it must be strictly before")
	}
	if !LeaseValid(ctx, now.Add(-time.Nanosecond)) {
		t.Error("not valid just before the validity")
	}
}

func TestBuilderTakesTheManagersLeaseValidity(t *testing.T) {
	mine := func() time.Time { return time.Time{} }
	b := &Builder{mgr: validityManager{v: func() time.Time { return time.Unix(42, 0) }}, opts: Options{LeaseValidity: mine}}
	o, err := b.options()
	if err != nil {
		t.Fatal(err)
	}
	if o.LeaseValidity == nil || !o.LeaseValidity().Equal(time.Unix(42, 0)) {
		t.Fatal("the builder's LeaseValidity overrode the manager's; a sharding manager's must win")
	}
}

// validityManager is a Manager whose only option is a LeaseValidity.
type validityManager struct {
	Manager
	v LeaseValidity
}

func (m validityManager) GetControllerOptions() Options { return Options{LeaseValidity: m.v} }

func (m validityManager) GetLogger() logr.Logger { return logr.Discard() }
