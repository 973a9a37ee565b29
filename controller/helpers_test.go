package controller

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"github.com/kshard/kshard/internal/testwait"
	"github.com/kshard/kshard/shard"
)

// req builds a Request.
func req(ns, name string) Request {
	return Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
}

// queueSource is a Source that hands the controller's gated Queue to the test.
type queueSource struct {
	mu    sync.Mutex
	q     Queue
	ready chan struct{} // closed by Start
}

func (s *queueSource) Start(_ context.Context, q Queue) error {
	ready := s.readyCh()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.q = q
	close(ready)
	return nil
}

// readyCh returns a channel closed once the source has been started.
func (s *queueSource) readyCh() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ready == nil {
		s.ready = make(chan struct{})
	}
	return s.ready
}

// Replay has nothing to replay: the source holds no objects, its requests
// are the test's. It makes the source acceptable to a controller that
// starts inactive.
func (*queueSource) Replay(context.Context, Queue) error { return nil }

func (s *queueSource) Add(r Request) {
	s.mu.Lock()
	q := s.q
	s.mu.Unlock()
	q.Add(r)
}

// harness runs one controller fed by a queueSource, with its own registry.
type harness struct {
	t   *testing.T
	c   *controller
	src *queueSource
	reg *prometheus.Registry
}

// startController builds and starts a controller; it is stopped, and
// waited for, when the test ends.
func startController(t *testing.T, r Reconciler, opts Options, extra ...Source) *harness {
	t.Helper()
	reg := prometheus.NewRegistry()
	opts.Registerer = reg
	if opts.Logger.GetSink() == nil {
		// Into the test's log rather than the default's stderr; the
		// controller is stopped before the test ends.
		opts.Logger = funcr.New(func(prefix, args string) { t.Log(prefix, args) }, funcr.Options{})
	}
	ci, err := New("test", r, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h := &harness{t: t, c: ci.(*controller), src: &queueSource{}, reg: reg}
	for _, s := range append([]Source{h.src}, extra...) {
		if err := ci.Watch(s); err != nil {
			t.Fatalf("Watch: %v", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ci.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Start returned %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("controller did not stop within 10s")
		}
	})
	<-h.src.readyCh()
	// h.src is started first; the extra sources after it. A Replay before
	// they are started skips them (a source not started yet delivers its
	// whole cache when it starts), so wait until every one is.
	sources := 1 + len(extra)
	testwait.True(t, 10*time.Second, "every source started", func() bool {
		h.c.mu.Lock()
		defer h.c.mu.Unlock()
		return len(h.c.started) == sources
	})
	return h
}

// metric returns the value of the series of name whose labels include want.
func (h *harness) metric(name string, want map[string]string) float64 {
	h.t.Helper()
	return gather(h.t, h.reg, name, want)
}

func gather(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for k, v := range want {
				if !hasLabel(m, k, v) {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

func hasLabel(m *dto.Metric, k, v string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == k && l.GetValue() == v {
			return true
		}
	}
	return false
}

func (h *harness) result(r string) float64 {
	return h.metric("controller_runtime_reconcile_total", map[string]string{"controller": "test", "result": r})
}

func (h *harness) decision(d string) float64 {
	return h.metric("kshard_gate_decisions_total", map[string]string{"controller": "test", "decision": d})
}

// recordingLimiter is a fast rate limiter that records calls.
type recordingLimiter struct {
	mu     sync.Mutex
	whens  map[Request]int
	forget map[Request]int
}

func newRecordingLimiter() *recordingLimiter {
	return &recordingLimiter{whens: map[Request]int{}, forget: map[Request]int{}}
}

func (l *recordingLimiter) When(r Request) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.whens[r]++
	return time.Millisecond
}

func (l *recordingLimiter) Forget(r Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forget[r]++
}

func (l *recordingLimiter) NumRequeues(r Request) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.whens[r]
}

func (l *recordingLimiter) counts(r Request) (whens, forgets int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.whens[r], l.forget[r]
}

var _ workqueue.TypedRateLimiter[Request] = &recordingLimiter{}

// keysIn returns n distinct requests whose partitions (under p) are in set,
// and n whose partitions are not.
func keysIn(p shard.Partitioner, set shard.PartitionSet, n int) (in, out []Request) {
	for i := 0; len(in) < n || len(out) < n; i++ {
		r := req("ns", "obj-"+strconv.Itoa(i))
		if set.Has(p.Partition(r.Key())) {
			if len(in) < n {
				in = append(in, r)
			}
		} else if len(out) < n {
			out = append(out, r)
		}
	}
	return in, out
}

// counter counts reconciles per request.
type counter struct {
	mu    sync.Mutex
	calls map[Request]int
}

func newCounter() *counter { return &counter{calls: map[Request]int{}} }

func (c *counter) inc(r Request) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[r]++
	return c.calls[r]
}

func (c *counter) get(r Request) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[r]
}

func (c *counter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.calls {
		n += v
	}
	return n
}

func newRegistry() *prometheus.Registry { return prometheus.NewRegistry() }
