package fence

import (
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/shard"
)

// Reasons of kshard_writes_refused_total.
const (
	// reasonReconcile: the write's context carries a validity (a reconcile's
	// or a singleton's) that has passed or was ended by a fence.
	reasonReconcile = "reconcile"
	// reasonReplica: the write's context carries no validity and the
	// replica's own validity, held before, has passed or was ended by a
	// fence, with no renewal since.
	reasonReplica = "replica"
)

// Transport returns a rest.Config WrapTransport function (for
// rest.Config.Wrap) that refuses, before sending, every write
//
//   - issued under a context whose lease validity
//     (controller.WithLeaseValidity) has passed or was ended by a fence;
//   - issued under a context without one (context.Background, a helper's
//     context.TODO) while the replica's validity, replica (the ring
//     coordinator's), has passed or was ended by a fence after the replica
//     had held one, until a renewal re-establishes it. Before the replica
//     was ever valid (starting, not a member yet) such writes pass, so
//     setup writes work.
//
// Each refusal is counted in refused by reason (reasonReconcile,
// reasonReplica; nil: not counted; see NewWritesRefused). Reads pass
// unchanged. replica nil means the replica is never valid: only the
// first rule applies.
//
// Put it only on the clients of user code: kshard's own clients (Lease
// renewals, pod reads for proofs of death, the sharded cache's label
// patches) must not carry it, or a replica that lost its validity could
// never renew it.
//
// What it cannot stop is a request already handed to the connection before
// the validity passed: such a write can land after a peer took the key
// over. Writes that must never be stale should carry a resourceVersion
// precondition (Update with the object read, or a Patch with
// metadata.resourceVersion), so the API server rejects them.
func Transport(replica controller.LeaseValidity, refused *prometheus.CounterVec) func(http.RoundTripper) http.RoundTripper {
	if refused == nil {
		refused = NewWritesRefused()
	}
	if replica == nil {
		replica = func() shard.Validity { return shard.Validity{} }
	}
	return func(next http.RoundTripper) http.RoundTripper {
		return &transport{next: next, now: time.Now, replica: replica, refused: refused}
	}
}

// transport reads the clock itself, because after a pause the timer that
// would cancel the reconcile's context, and the coordinator's step that
// would publish the fence, may not have run yet.
type transport struct {
	next    http.RoundTripper
	now     func() time.Time
	replica controller.LeaseValidity
	refused *prometheus.CounterVec
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !isWrite(req.Method) {
		return t.next.RoundTrip(req)
	}
	if why, reason := t.refusal(req); why != "" {
		t.refused.WithLabelValues(reason).Inc()
		// RoundTrip must close the body, even on error.
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("%s %s refused: %s: %w", req.Method, req.URL.Path, why, controller.ErrLeaseExpired)
	}
	return t.next.RoundTrip(req)
}

// refusal says why the write req may not be sent now, and the reason it is
// counted under; "" when it may.
func (t *transport) refusal(req *http.Request) (why, reason string) {
	now := t.now()
	if until, ok := controller.ValidUntil(req.Context()); ok {
		if now.Before(until) {
			return "", ""
		}
		if until.IsZero() {
			return "the reconcile's lease validity was ended by a fence", reasonReconcile
		}
		return "the reconcile's lease validity passed at " + until.Format(time.RFC3339Nano), reasonReconcile
	}
	v := t.replica()
	switch {
	case !v.EverHeld() || v.ValidAt(now):
		return "", ""
	case v.Until.IsZero():
		return "the replica's lease validity was ended by a fence (issued without a reconcile context; waiting for a renewal)", reasonReplica
	default:
		return "the replica's lease validity passed at " + v.Until.Format(time.RFC3339Nano) + " (issued without a reconcile context; waiting for a renewal)", reasonReplica
	}
}

// isWrite reports whether method changes state on the API server; reads
// (GET, HEAD, and watches, which are GETs) pass whatever the validity.
func isWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// NewWritesRefused returns the counter kshard_writes_refused_total{reason},
// for Transport, with both reasons at zero; register it in the registry the
// metrics are served from.
func NewWritesRefused() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kshard_writes_refused_total",
		Help: "API writes refused by the clients before sending, by reason: reconcile (issued under a reconcile or singleton whose lease validity had passed or was ended by a fence), replica (issued without a reconcile context while the replica's own validity, once held, had passed or was ended by a fence, before a renewal re-established it).",
	}, []string{"reason"})
	c.WithLabelValues(reasonReconcile)
	c.WithLabelValues(reasonReplica)
	return c
}
