package manager

import (
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kshard/kshard/controller"
)

// fencingTransport is the last check before a write leaves the process: a
// request issued under a reconcile context whose lease validity has passed
// is refused, not sent. It reads the clock itself, because after a pause the
// timer that would cancel the context may not have fired yet.
//
// What it cannot stop is a request already handed to the connection before
// the validity passed: such a write can land after a peer took the key over.
// Writes that must never be stale should carry a resourceVersion
// precondition (Update with the object read, or a Patch with
// metadata.resourceVersion), so the API server rejects them.
type fencingTransport struct {
	next    http.RoundTripper
	now     func() time.Time
	refused prometheus.Counter
}

// newFencingWrapper returns a rest.Config WrapTransport function that puts a
// fencingTransport in front of the client's transport.
func newFencingWrapper(refused prometheus.Counter) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		return &fencingTransport{next: next, now: time.Now, refused: refused}
	}
}

func (t *fencingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
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

// newWritesRefused is kshard_writes_refused_total.
func newWritesRefused() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kshard_writes_refused_total",
		Help: "API writes issued under a reconcile whose lease validity (last renewal sent + RenewDeadline) had passed, refused by the manager's clients before sending.",
	})
}
