package crshard

import (
	"context"
	"sync/atomic"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Observer is told of every reconcile the rings of this process run and of
// every activation and revocation, for test kits that record them (kshard's
// e2e test records them with manager/kshardtest's recorder, to check that no
// key was reconciled by two replicas at once and no update was lost). It is
// process-wide so that a test build can install it without changing the
// operator's code; production code leaves it unset.
type Observer struct {
	// Reconcile runs each admitted reconcile; it must call next (with ctx
	// or a context derived from it) and return what next returns. cache
	// is the manager's cache. Nil: next is called directly.
	Reconcile func(ctx context.Context, cache client.Reader, req reconcile.Request, next reconcile.Func) (reconcile.Result, error)
	// Ring is told "activate" before partitions are admitted, "revoke"
	// before they are revoked, and "revoked" once they drained. An error
	// fails the activation or revocation (the coordinator retries). Nil:
	// not told.
	Ring func(kind string, partitions []int) error
}

var observer atomic.Pointer[Observer]

// Observe installs o for every ring of this process (nil removes it).
// Install it before the manager starts.
func Observe(o *Observer) { observer.Store(o) }

func observeRing(kind string, partitions []int) error {
	if o := observer.Load(); o != nil && o.Ring != nil {
		return o.Ring(kind, partitions)
	}
	return nil
}
