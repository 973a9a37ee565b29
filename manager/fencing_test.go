package manager

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/kshard/kshard/controller"
)

// countingTransport answers 200 to everything and counts what it was sent.
type countingTransport struct{ sent []string }

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.sent = append(c.sent, req.Method)
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
}

// fencing returns a fencingTransport over a countingTransport whose clock
// reads now.
func fencing(now time.Time) (*fencingTransport, *countingTransport) {
	next := &countingTransport{}
	t := newFencingWrapper(prometheus.NewCounter(prometheus.CounterOpts{Name: "refused"}))(next).(*fencingTransport)
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

// TestManagerClientsRefuseLateWrites wires the pieces: a client built from
// the manager's config refuses a write of a reconcile whose validity passed
// (the server never sees it) and sends its reads and other writes.
func TestManagerClientsRefuseLateWrites(t *testing.T) {
	var mu sync.Mutex // guards seen, appended to by the server's goroutines
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"y","namespace":"x"}}`)
	}))
	defer srv.Close()
	m, err := New(&rest.Config{Host: srv.URL}, Options{Ring: "ring", LeaseNamespace: "default", Identity: "r-0"})
	if err != nil {
		t.Fatal(err)
	}
	if v := m.GetControllerOptions().LeaseValidity; v == nil || !v().Until.IsZero() {
		t.Fatal("controllers of a manager must get a LeaseValidity, zero before the first renewal")
	}
	cms := m.GetClient().CoreV1().ConfigMaps("x")
	expired := validFor(time.Now().Add(-time.Millisecond))
	_, err = cms.Patch(expired, "y", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
	if !errors.Is(err, controller.ErrLeaseExpired) {
		t.Fatalf("late patch: error %v, want controller.ErrLeaseExpired", err)
	}
	if _, err := cms.Get(expired, "y", metav1.GetOptions{}); err != nil {
		t.Fatalf("read under an expired validity: %v", err)
	}
	valid := validFor(time.Now().Add(time.Hour))
	if _, err := cms.Patch(valid, "y", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch within the validity: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(seen, ","); got != "GET,PATCH" {
		t.Fatalf("the server saw %s, want GET,PATCH (the late patch never sent)", got)
	}
}

// TestFencingTransportExported checks that the exported wrapper refuses a
// write under an expired validity and passes a read, and tolerates a nil
// counter.
func TestFencingTransportExported(t *testing.T) {
	next := &countingTransport{}
	rt := FencingTransport(nil)(next)
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
