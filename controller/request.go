package controller

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kshard/kshard/shard"
)

// Request names the object to reconcile. Its Key decides its partition.
type Request struct {
	types.NamespacedName
}

// Key is the request's shard key: "namespace/name", or "name" for a
// cluster-scoped object.
func (r Request) Key() string { return shard.KeyOf(r.Namespace, r.Name) }

// Result tells the controller what to do after a successful reconcile.
type Result struct {
	// RequeueAfter, if positive, reconciles the request again after this
	// long (and resets its rate-limit backoff).
	RequeueAfter time.Duration

	// Requeue, if true and RequeueAfter is zero, reconciles the request again
	// after its rate-limit backoff. Prefer RequeueAfter or returning an error.
	Requeue bool
}

// IsZero reports whether r asks for nothing.
func (r Result) IsZero() bool { return r == Result{} }

// Reconciler brings the object named by a Request to its desired state.
// A returned error is retried with rate limiting unless it is a
// TerminalError; the Result is ignored when the error is non-nil.
type Reconciler interface {
	Reconcile(ctx context.Context, req Request) (Result, error)
}

// ReconcilerFunc adapts a function to Reconciler.
type ReconcilerFunc func(ctx context.Context, req Request) (Result, error)

// Reconcile calls f.
func (f ReconcilerFunc) Reconcile(ctx context.Context, req Request) (Result, error) {
	return f(ctx, req)
}

// TerminalError marks err as not worth retrying: the controller records it
// (log and metrics) and forgets the request until its next event.
// TerminalError(nil) returns nil.
func TerminalError(err error) error {
	if err == nil {
		return nil
	}
	return &terminalError{err: err}
}

// IsTerminal reports whether err, or any error it wraps, is a TerminalError.
func IsTerminal(err error) bool {
	var te *terminalError
	return errors.As(err, &te)
}

type terminalError struct{ err error }

func (e *terminalError) Error() string { return "terminal error: " + e.err.Error() }
func (e *terminalError) Unwrap() error { return e.err }
