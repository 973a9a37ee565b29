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
	"github.com/kshard/kshard/shard"
)

// countingTransport answers 200 to everything and counts what it was sent.
type countingTransport struct{ sent []string }

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.sent = append(c.sent, req.Method)
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
}

// fencing returns a transport over a countingTransport whose clock reads
// now, for a replica that has never been valid.
func fencing(now time.Time) (*transport, *countingTransport) {
	next := &countingTransport{}
	t := Transport(nil, NewWritesRefused())(next).(*transport)
	t.now = func() time.Time { return now }
	return t, next
}

// validFor returns a context whose writes are valid until until, in an
// epoch no fence ends.
func validFor(until time.Time) context.Context {
	return controller.WithLeaseValidity(context.Background(), func() shard.Validity {
		return shard.Validity{Until: until, Epoch: 1}
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
	if got := counterValue(t, tr.refused, reasonReconcile); got != 4 {
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
		{context.Background(), http.MethodPut}, // no reconcile, and the replica was never valid: a setup write
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
	if got := counterValue(t, tr.refused, reasonReconcile); got != 0 {
		t.Fatalf("refused counter = %v, want 0", got)
	}
}

func counterValue(t *testing.T, c *prometheus.CounterVec, reason string) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.WithLabelValues(reason).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestTransportWithoutCounter checks that the wrapper refuses a write under
// an expired validity and passes a read with no counter to count in.
func TestTransportWithoutCounter(t *testing.T) {
	next := &countingTransport{}
	rt := Transport(nil, nil)(next)
	expired := controller.WithLeaseValidity(context.Background(), func() shard.Validity {
		return shard.Validity{Until: time.Now().Add(-time.Second)}
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

// replicaFake is a replica's validity as the coordinator publishes it, set
// by the test.
type replicaFake struct{ v shard.Validity }

func (r *replicaFake) validity() shard.Validity { return r.v }

// TestTransportReplicaValidity walks a replica through its life: the writes
// it issues without a reconcile context pass until it has been valid, are
// refused once that validity passed (read on the transport's clock, before
// any fence was published) or a fence ended it, and pass again after a
// renewal; a reconcile's writes keep their own rule throughout.
func TestTransportReplicaValidity(t *testing.T) {
	t0 := time.Now()
	rd := 2 * time.Second
	replica := &replicaFake{}
	next := &countingTransport{}
	tr := Transport(replica.validity, NewWritesRefused())(next).(*transport)
	// Started before any validity, in epoch 0, which the fence below ends.
	reconcile := controller.WithLeaseValidity(context.Background(), replica.validity)
	for _, step := range []struct {
		name     string
		validity shard.Validity
		now      time.Time
		ctx      context.Context
		refused  bool
	}{
		{"starting: never valid", shard.Validity{}, t0, context.Background(), false},
		{"valid", shard.Validity{Until: t0.Add(rd)}, t0.Add(time.Second), context.Background(), false},
		{"validity passed, no fence published yet (a pause)", shard.Validity{Until: t0.Add(rd)}, t0.Add(rd), context.Background(), true},
		{"fenced", shard.Validity{Epoch: 1}, t0.Add(3 * rd), context.Background(), true},
		{"a renewal sent while fenced does not lift the fence", shard.Validity{Epoch: 1}, t0.Add(3*rd + time.Second), context.Background(), true},
		{"renewed: valid again", shard.Validity{Until: t0.Add(4 * rd), Epoch: 1}, t0.Add(3*rd + time.Second), context.Background(), false},
		{"a reconcile started before the fence stays refused: its own rule", shard.Validity{Until: t0.Add(4 * rd), Epoch: 1}, t0.Add(3*rd + time.Second), reconcile, true},
	} {
		replica.v, tr.now = step.validity, func() time.Time { return step.now }
		resp, err := tr.RoundTrip(request(t, step.ctx, http.MethodPatch))
		switch {
		case step.refused && err == nil:
			resp.Body.Close()
			t.Fatalf("%s: the write was sent", step.name)
		case step.refused && !errors.Is(err, controller.ErrLeaseExpired):
			t.Fatalf("%s: error %v does not wrap controller.ErrLeaseExpired", step.name, err)
		case !step.refused && err != nil:
			t.Fatalf("%s: refused: %v", step.name, err)
		case err == nil:
			resp.Body.Close()
		}
		t.Logf("%s: %v", step.name, err)
	}
	if got := counterValue(t, tr.refused, reasonReplica); got != 3 {
		t.Fatalf("refused for the replica = %v, want 3", got)
	}
	if got := counterValue(t, tr.refused, reasonReconcile); got != 1 {
		t.Fatalf("refused for a reconcile = %v, want 1", got)
	}
	if len(next.sent) != 3 {
		t.Fatalf("sent %v, want three PATCHes", next.sent)
	}
}
