package controller

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/kshard/kshard/internal/testwait"
	"github.com/kshard/kshard/shard"
)

// validityClock is a LeaseValidity a test moves.
type validityClock struct {
	v atomic.Pointer[shard.Validity]
}

func (c *validityClock) set(until time.Time, epoch uint64) {
	c.v.Store(&shard.Validity{Until: until, Epoch: epoch})
}

func (c *validityClock) get() shard.Validity { return *c.v.Load() }

func TestWorkerRefusesToStartOnceValidityPassed(t *testing.T) {
	var v validityClock
	v.set(time.Now().Add(-time.Millisecond), 1) // passed: as after a pause
	calls := newCounter()
	h := startController(t, ReconcilerFunc(func(_ context.Context, r Request) (Result, error) {
		calls.inc(r)
		return Result{}, nil
	}), Options{LeaseValidity: v.get})
	r := req("default", "a")
	h.src.Add(r)
	testwait.True(t, 10*time.Second, "a refusal", func() bool { return h.metric("kshard_reconcile_refused_total", nil) >= 1 })
	if got := calls.get(r); got != 0 {
		t.Fatalf("reconciled %d times while the lease validity had passed, want 0", got)
	}
	if got := h.result("success") + h.result("error"); got != 0 {
		t.Fatalf("reconcile_total counted %v results for a refused reconcile, want 0", got)
	}
	// Re-validated: the request was requeued, not dropped.
	v.set(time.Now().Add(time.Hour), 2)
	testwait.True(t, 10*time.Second, "the reconcile after re-validation", func() bool { return calls.get(r) == 1 })
}

// TestReconcileValidityFollowsRenewals: the reconcile's context carries the
// validity as it moves: a renewal in the same epoch extends it (a healthy
// replica's long reconcile is not cut off), a fence's new epoch ends it
// even if a later renewal made the lease valid again.
func TestReconcileValidityFollowsRenewals(t *testing.T) {
	first := time.Now().Add(time.Minute)
	var v validityClock
	v.set(first, 3)
	started, proceed := make(chan context.Context, 1), make(chan struct{})
	h := startController(t, ReconcilerFunc(func(ctx context.Context, _ Request) (Result, error) {
		started <- ctx
		<-proceed
		return Result{}, nil
	}), Options{LeaseValidity: v.get})
	defer close(proceed)
	h.src.Add(req("default", "a"))
	ctx := <-started
	if _, hasDeadline := ctx.Deadline(); hasDeadline {
		t.Error("the reconcile context has a deadline; renewals could not extend it")
	}
	if until, ok := ValidUntil(ctx); !ok || !until.Equal(first) {
		t.Fatalf("ValidUntil = %v, %v; want %v, true", until, ok, first)
	}
	renewed := first.Add(time.Minute)
	v.set(renewed, 3)
	if until, _ := ValidUntil(ctx); !until.Equal(renewed) {
		t.Fatalf("after a renewal in the same epoch ValidUntil = %v, want %v", until, renewed)
	}
	if !LeaseValid(ctx, first.Add(time.Second)) {
		t.Error("a write past the first validity but within the renewed one was refused")
	}
	v.set(renewed.Add(time.Hour), 4) // fenced and renewed again since
	if until, ok := ValidUntil(ctx); !ok || !until.IsZero() {
		t.Fatalf("after a fence ValidUntil = %v, %v; want the zero time, true", until, ok)
	}
	if LeaseValid(ctx, time.Now()) {
		t.Error("a write of a reconcile started before a fence was allowed after it")
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
	ctx := WithLeaseValidity(context.Background(), func() shard.Validity { return shard.Validity{Until: now, Epoch: 1} })
	if LeaseValid(ctx, now) {
		t.Error("valid at the validity's own instant; it must be strictly before")
	}
	if !LeaseValid(ctx, now.Add(-time.Nanosecond)) {
		t.Error("not valid just before the validity")
	}
}

func TestBuilderTakesTheManagersLeaseValidity(t *testing.T) {
	mine := func() shard.Validity { return shard.Validity{} }
	b := &Builder{mgr: validityManager{v: func() shard.Validity { return shard.Validity{Until: time.Unix(42, 0)} }}, opts: Options{LeaseValidity: mine}}
	o, err := b.options()
	if err != nil {
		t.Fatal(err)
	}
	if o.LeaseValidity == nil || !o.LeaseValidity().Until.Equal(time.Unix(42, 0)) {
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
