package kshardtest

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/internal/recorder"
)

func TestGateOpenHoldCut(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer srv.Close()
	g := newGate()
	client := &http.Client{Transport: g.wrap(http.DefaultTransport)}
	get := func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(context.Background()); err != nil {
		t.Fatalf("open gate: %v", err)
	}

	// Held: the request waits, unsent, until the gate opens again. Shown
	// by state, not by a window: the gate waits on a request's context
	// only while it holds it, and the transport behind it counts what is
	// sent.
	var sent atomic.Int32
	next := roundTripperFunc(func(*http.Request) (*http.Response, error) {
		sent.Add(1)
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
	})
	g.set(gateHold)
	waiting := &doneWatch{Context: context.Background(), watched: make(chan struct{})}
	req, _ := http.NewRequestWithContext(waiting, http.MethodGet, srv.URL, nil)
	done := make(chan error, 1)
	go func() {
		resp, err := g.wrap(next).RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case <-waiting.watched:
	case err := <-done:
		t.Fatalf("held request returned before the gate opened: %v (%d sent)", err, sent.Load())
	}
	if n := sent.Load(); n != 0 {
		t.Fatalf("held request: %d sent while the gate holds it", n)
	}
	g.set(gateOpen)
	if err := <-done; err != nil || sent.Load() != 1 {
		t.Fatalf("held request after reopening: %v, %d sent; want nil, 1", err, sent.Load())
	}

	// A held request gives up with its context.
	g.set(gateHold)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- get(ctx) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("held request with a cancelled context: %v, want context.Canceled", err)
	}

	// Cut: every request fails at once, held ones included.
	go func() { done <- get(context.Background()) }()
	g.set(gateCut)
	if err := <-done; !errors.Is(err, errCut) {
		t.Fatalf("held request when cut: %v, want errCut", err)
	}
	if err := get(context.Background()); !errors.Is(err, errCut) {
		t.Fatalf("request when cut: %v, want errCut", err)
	}
}

// doneWatch is a context that closes watched the first time its Done is
// called: the gate calls it only to wait while it holds a request.
type doneWatch struct {
	context.Context
	once    sync.Once
	watched chan struct{}
}

func (c *doneWatch) Done() <-chan struct{} {
	c.once.Do(func() { close(c.watched) })
	return c.Context.Done()
}

func TestRecordReconciles(t *testing.T) {
	dir := t.TempDir()
	w, err := recorder.Open(dir, recorder.Process{Replica: "r-0", Incarnation: "a"})
	if err != nil {
		t.Fatal(err)
	}
	gens := map[string]int64{"ns/done": 3, "ns/failed": 4, "ns/cancelled": 5}
	gen := func(_ context.Context, req controller.Request) (int64, bool, error) {
		g, ok := gens[req.Key()]
		return g, ok, nil
	}
	calls := 0
	inner := controller.ReconcilerFunc(func(ctx context.Context, req controller.Request) (controller.Result, error) {
		calls++
		if req.Name == "failed" {
			return controller.Result{}, errors.New("boom")
		}
		return controller.Result{}, nil // also for "cancelled": a reconciler that hides its early stop
	})
	r := RecordReconciles(&Recorder{w: w}, gen, inner)
	req := func(name string) controller.Request {
		var q controller.Request
		q.Namespace, q.Name = "ns", name
		return q
	}
	if _, err := r.Reconcile(context.Background(), req("done")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background(), req("failed")); err == nil || err.Error() != "boom" {
		t.Fatalf("the reconciler's error must come through: %v", err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Reconcile(cancelled, req("cancelled")); err != nil {
		t.Fatalf("a nil result must come through unchanged: %v", err)
	}
	if _, err := r.Reconcile(context.Background(), req("gone")); err != nil {
		t.Fatal(err)
	}
	if calls != 4 {
		t.Fatalf("inner reconciler ran %d times, want 4 (a gone object is reconciled too)", calls)
	}
	w.Close()

	log, err := recorder.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]recorder.Interval{}
	for _, iv := range log.Intervals {
		got[iv.Key] = iv
	}
	if len(got) != 3 {
		t.Fatalf("recorded %v, want the three existing objects (not the gone one)", got)
	}
	for key, completed := range map[string]bool{"ns/done": true, "ns/failed": false, "ns/cancelled": false} {
		iv := got[key]
		if iv.Gen != gens[key] || iv.Completed() != completed {
			t.Errorf("%s: gen %d completed %v, want gen %d completed %v (%s)", key, iv.Gen, iv.Completed(), gens[key], completed, iv)
		}
	}
}

func TestReplicaFromEnvOutsideTheKit(t *testing.T) {
	t.Setenv(envOptions, "")
	_, err := ReplicaFromEnv()
	if err == nil || !strings.Contains(err.Error(), "StartProcess") {
		t.Fatalf("err = %v, want one pointing at Env.StartProcess", err)
	}
}

func TestCacheReportRoundTrip(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	want := []CachedObject{{Key: "ns/a", ResourceVersion: "7"}, {Key: "ns/b", ResourceVersion: "9"}}
	var fail atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- serveCacheReport(ctx, l, func(context.Context) ([]CachedObject, error) {
			if fail.Load() {
				return nil, errors.New("the informer is not synced")
			}
			return want, nil
		})
	}()
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	got, err := ReadCacheReport(rctx, l.Addr().String())
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %v, %v; want %v", got, err, want)
	}
	fail.Store(true)
	if _, err := ReadCacheReport(rctx, l.Addr().String()); err == nil || !strings.Contains(err.Error(), "not synced") {
		t.Fatalf("want the server's error passed on, got %v", err)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("shutting the server down: %v", err)
	}
}

func TestCheckCaches(t *testing.T) {
	server := []CachedObject{{Key: "ns/a", ResourceVersion: "1"}, {Key: "ns/b", ResourceVersion: "2"}, {Key: "ns/c", ResourceVersion: "3"}}
	good := map[string][]CachedObject{"r-0": {server[0], server[2]}, "r-1": {server[1]}}
	if p := CheckCaches(server, good, true); len(p) != 0 {
		t.Fatalf("sharded caches that agree reported: %v", p)
	}
	full := map[string][]CachedObject{"r-0": server, "r-1": server}
	if p := CheckCaches(server, full, false); len(p) != 0 {
		t.Fatalf("full caches that agree reported: %v", p)
	}
	if p := CheckCaches(server, full, true); len(p) != 3 {
		t.Fatalf("want every object reported in two sharded caches, got %v", p)
	}
	bad := map[string][]CachedObject{
		"r-0": {server[0], {Key: "ns/b", ResourceVersion: "1"}, {Key: "ns/gone", ResourceVersion: "5"}},
		"r-1": {server[1], server[1]},
	}
	got := strings.Join(CheckCaches(server, bad, true), "\n")
	for _, want := range []string{
		"ns/b: r-0's cache holds resourceVersion 1, the API server 2",
		"ns/gone: in r-0's cache (resourceVersion 5) but not on the API server",
		"ns/b: r-1's cache lists it twice",
		"ns/b: in 2 live replicas' caches [r-0 r-1], want exactly one",
		"ns/c: in 0 live replicas' caches [], want exactly one",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

func TestLivenessBoundDefaults(t *testing.T) {
	o := Options{LeaseDuration: 10 * time.Second, DrainGracePeriod: 5 * time.Second}.withDefaults()
	if want := 15*time.Second + LivenessAllowance; o.LivenessBound != want {
		t.Fatalf("default LivenessBound = %s, want LeaseDuration + DrainGracePeriod + LivenessAllowance = %s", o.LivenessBound, want)
	}
	if o := (Options{LivenessBound: time.Minute}).withDefaults(); o.LivenessBound != time.Minute {
		t.Fatalf("a set LivenessBound was replaced: %s", o.LivenessBound)
	}
}

func TestInformerRecovery(t *testing.T) {
	for _, c := range []struct{ outage, want time.Duration }{
		{0, 1600 * time.Millisecond},
		{5 * time.Second, 11600 * time.Millisecond},
		{30 * time.Second, time.Minute},
		{10 * time.Minute, time.Minute},
	} {
		if got := InformerRecovery(c.outage); got != c.want {
			t.Errorf("InformerRecovery(%s) = %s, want %s", c.outage, got, c.want)
		}
	}
}
