package fence

import (
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kshard/kshard/controller"
)

// Transport returns a rest.Config WrapTransport function (for
// rest.Config.Wrap) that refuses, before sending, every write issued under
// a context whose lease validity (controller.WithLeaseValidity) has passed
// or was ended by a fence, counting each refusal in refused (nil: not
// counted; see NewWritesRefused). Reads, and writes under contexts without
// a validity, pass unchanged.
//
// What it cannot stop is a request already handed to the connection before
// the validity passed: such a write can land after a peer took the key
// over. Writes that must never be stale should carry a resourceVersion
// precondition (Update with the object read, or a Patch with
// metadata.resourceVersion), so the API server rejects them.
func Transport(refused prometheus.Counter) func(http.RoundTripper) http.RoundTripper {
	if refused == nil {
		refused = prometheus.NewCounter(prometheus.CounterOpts{Name: "kshard_writes_refused_total_unregistered"})
	}
	return func(next http.RoundTripper) http.RoundTripper {
		return &transport{next: next, now: time.Now, refused: refused}
	}
}

// transport reads the clock itself, because after a pause the timer that
// would cancel the reconcile's context may not have fired yet.
type transport struct {
	next    http.RoundTripper
	now     func() time.Time
	refused prometheus.Counter
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if isWrite(req.Method) && !controller.LeaseValid(req.Context(), t.now()) {
		t.refused.Inc()
		until, _ := controller.ValidUntil(req.Context())
		// RoundTrip must close the body, even on error.
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("%s %s refused: %w (valid until %s)", req.Method, req.URL.Path, controller.ErrLeaseExpired, until.Format(time.RFC3339Nano))
	}
	return t.next.RoundTrip(req)
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

// NewWritesRefused returns the counter kshard_writes_refused_total, for
// Transport; register it in the registry the metrics are served from.
func NewWritesRefused() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kshard_writes_refused_total",
		Help: "API writes issued under a reconcile whose lease validity (last renewal sent + RenewDeadline) had passed, refused by the manager's clients before sending.",
	})
}
