package gate

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestEnterFailsOnceRevoked(t *testing.T) {
	g := New(3, true)
	if !g.Enter(1) {
		t.Fatal("Enter on an active partition failed")
	}
	g.Revoke(1)
	if g.Active(1) {
		t.Fatal("partition still active after Revoke")
	}
	if g.Enter(1) {
		t.Fatal("Enter succeeded on a revoked partition")
	}
	if got := g.inFlight(1); got != 1 {
		t.Fatalf("inFlight(1) = %d, want 1 (the reconcile admitted before Revoke)", got)
	}
	changed := g.changes()
	g.Exit(1)
	select {
	case <-changed:
	default:
		t.Fatal("the last Exit of a revoked partition did not signal Changed")
	}
	if g.inFlight(1) != 0 || g.TotalInFlight() != 0 {
		t.Fatalf("in flight after Exit: partition %d, total %d", g.inFlight(1), g.TotalInFlight())
	}
	if !g.Activate(1) || g.Activate(1) {
		t.Fatal("Activate must report true exactly when the partition was revoked")
	}
	if !g.Enter(1) {
		t.Fatal("Enter failed after re-activation")
	}
}

func TestStartInactiveAndOutOfRange(t *testing.T) {
	g := New(2, false)
	for _, p := range []int{-1, 0, 1, 2} {
		if g.Active(p) || g.Enter(p) {
			t.Fatalf("partition %d admitted on an inactive gate", p)
		}
	}
	g.Revoke(5) // out of range: ignored, no panic
	if g.Activate(7) || g.inFlight(-3) != 0 {
		t.Fatal("out-of-range partitions must be inert")
	}
}

// TestNoAdmissionAfterDrainObservedZero hammers Enter/Exit on one partition
// while revoking it: once the drain has observed zero in flight, no Enter
// may succeed. This is the property rule 2 of the handoff protocol needs.
func TestNoAdmissionAfterDrainObservedZero(t *testing.T) {
	for round := range 200 {
		g := New(1, true)
		var drained atomic.Bool
		var violations atomic.Int64
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for range 4 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if g.Enter(0) {
						if drained.Load() {
							violations.Add(1)
						}
						g.Exit(0)
					}
				}
			})
		}
		g.Revoke(0)
		for {
			changed := g.changes() // before the check, so no wake-up is missed
			if g.inFlight(0) == 0 {
				break
			}
			<-changed
		}
		drained.Store(true)
		// Give the workers a chance to (wrongly) get in.
		for range 1000 {
			if g.Enter(0) {
				violations.Add(1)
				g.Exit(0)
			}
		}
		close(stop)
		wg.Wait()
		if v := violations.Load(); v != 0 {
			t.Fatalf("round %d: %d reconciles admitted after the drain observed zero", round, v)
		}
	}
}
