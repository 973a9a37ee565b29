package fence

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kshard/kshard/controller"
)

// countingTransport answers 200 to everything and counts what it was sent.
type countingTransport struct{ sent []string }

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.sent = append(c.sent, req.Method)
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
}

// fencing returns a transport over a countingTransport whose clock reads
// now.
func fencing(now time.Time) (*transport, *countingTransport) {
	next := &countingTransport{}
	t := Transport(prometheus.NewCounter(prometheus.CounterOpts{Name: "refused"}))(next).(*transport)
	t.now = func() time.Time { return now }
	return t, next
}

// validFor returns a context whose writes are valid until until, in an
// epoch no fence ends.
func validFor(until time.Time) context.Context {
	return controller.WithLeaseValidity(context.Background(), func() controller.Validity {
		return controller.Validity{Until: until, Epoch: 1}
	})
}

func request(t *testing.T, ctx context.Context, method string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, "https://api.invalid/api/v1/namespaces/x/configmaps/y", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestTransportRefusesWriteOnceValidityPassedEvenIfContextNotDone(t *testing.T) {
	// The validity is an hour away on the real clock, so the context's own
	// deadline timer cannot have fired; the transport's clock reads a
	// moment past it, as a process resumed after a pause does before that
	// timer's goroutine has run.
	until := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(validFor(until), until)
	defer cancel()
	tr, next := fencing(until.Add(time.Millisecond))
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if ctx.Err() != nil {
			t.Fatal("the context ended; the test would not show that the transport reads the clock")
		}
		resp, err := tr.RoundTrip(request(t, ctx, method))
		if err == nil {
			resp.Body.Close()
			t.Fatalf("%s issued after the lease validity was sent", method)
		}
		if !errors.Is(err, controller.ErrLeaseExpired) {
			t.Fatalf("%s: error %v does not wrap controller.ErrLeaseExpired", method, err)
		}
	}
	if len(next.sent) != 0 {
		t.Fatalf("the transport passed on %v", next.sent)
	}
	if got := counterValue(t, tr.refused); got != 4 {
		t.Fatalf("refused counter = %v, want 4", got)
	}
}

func TestTransportRefusesAtTheValidityInstant(t *testing.T) {
	until := time.Now().Add(time.Hour)
	ctx := validFor(until)
	tr, next := fencing(until)
	if resp, err := tr.RoundTrip(request(t, ctx, http.MethodPatch)); err == nil {
		resp.Body.Close()
		t.Fatal("a write at the validity's own instant was sent; validity ends there")
	}
	tr.now = func() time.Time { return until.Add(-time.Nanosecond) }
	resp, err := tr.RoundTrip(request(t, ctx, http.MethodPatch))
	if err != nil {
		t.Fatalf("a write just before the validity passed was refused: %v", err)
	}
	resp.Body.Close()
	if len(next.sent) != 1 {
		t.Fatalf("sent %v, want one PATCH", next.sent)
	}
}

func TestTransportPassesReadsAndWritesWithoutValidity(t *testing.T) {
	until := time.Now()
	tr, next := fencing(until.Add(time.Hour))
	expired := validFor(until)
	for _, tc := range []struct {
		ctx    context.Context
		method string
	}{
		{expired, http.MethodGet},              // reads (and watches) of a fenced reconcile do no harm
		{expired, http.MethodHead},             //
		{context.Background(), http.MethodPut}, // no reconcile: the manager's own Lease renewals
	} {
		resp, err := tr.RoundTrip(request(t, tc.ctx, tc.method))
		if err != nil {
			t.Fatalf("%s refused: %v", tc.method, err)
		}
		resp.Body.Close()
	}
	if got, want := strings.Join(next.sent, ","), "GET,HEAD,PUT"; got != want {
		t.Fatalf("sent %s, want %s", got, want)
	}
	if got := counterValue(t, tr.refused); got != 0 {
		t.Fatalf("refused counter = %v, want 0", got)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestTransportWithoutCounter checks that the wrapper refuses a write under
// an expired validity and passes a read with no counter to count in.
func TestTransportWithoutCounter(t *testing.T) {
	next := &countingTransport{}
	rt := Transport(nil)(next)
	expired := controller.WithLeaseValidity(context.Background(), func() controller.Validity {
		return controller.Validity{Until: time.Now().Add(-time.Second)}
	})
	for _, m := range []string{http.MethodGet, http.MethodPatch} {
		req := httptest.NewRequestWithContext(expired, m, "https://api/x", nil)
		resp, err := rt.RoundTrip(req)
		if m == http.MethodGet && err != nil {
			t.Fatalf("GET refused: %v", err)
		}
		if m == http.MethodPatch && !errors.Is(err, controller.ErrLeaseExpired) {
			t.Fatalf("PATCH under an expired validity: err = %v, want ErrLeaseExpired", err)
		}
		if resp != nil {
			resp.Body.Close()
		}
	}
	if len(next.sent) != 1 || next.sent[0] != http.MethodGet {
		t.Fatalf("sent %v, want only the GET", next.sent)
	}
}
