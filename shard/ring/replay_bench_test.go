package ring

import (
	"context"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/shard"
)

// memoryCache is a ReplayableSource over objects held in memory, standing
// in for an informer's cache: its replay hands each object to the
// handler as a create event. If pauseAt >= 0, the first replay stops
// before that object until resume is called, ignoring cancellation, as a
// replay busy in a slow handler would.
type memoryCache struct {
	objs    []*corev1.ConfigMap
	handler controller.EventHandler
	pauseAt int

	paused     chan struct{} // closed when the first replay reaches pauseAt
	resumeCh   chan struct{}
	resumeOnce sync.Once
	finished   chan struct{} // closed when the first replay returns

	mu        sync.Mutex
	replays   int
	firstTook time.Duration // how long the first replay took
}

func newMemoryCache(n, pauseAt int) *memoryCache {
	m := &memoryCache{handler: controller.EnqueueRequestForObject{}, pauseAt: pauseAt,
		paused: make(chan struct{}), resumeCh: make(chan struct{}), finished: make(chan struct{})}
	for i := range n {
		m.objs = append(m.objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "obj-" + strconv.Itoa(i)}})
	}
	return m
}

func (m *memoryCache) resume() { m.resumeOnce.Do(func() { close(m.resumeCh) }) }

func (m *memoryCache) Start(context.Context, controller.Queue) error { return nil }

func (m *memoryCache) Replay(ctx context.Context, q controller.Queue) error {
	m.mu.Lock()
	m.replays++
	first := m.replays == 1
	m.mu.Unlock()
	if first {
		start := time.Now()
		defer func() {
			m.mu.Lock()
			m.firstTook = time.Since(start)
			m.mu.Unlock()
			close(m.finished)
		}()
	}
	for i, o := range m.objs {
		if first && i == m.pauseAt {
			close(m.paused)
			<-m.resumeCh
		}
		m.handler.Create(ctx, controller.CreateEvent{Object: o}, q)
	}
	return nil
}

// maxObserver is a histogram that also keeps the largest value observed.
type maxObserver struct {
	prometheus.Histogram
	mu  sync.Mutex
	max float64
}

func (m *maxObserver) Observe(v float64) {
	m.mu.Lock()
	m.max = math.Max(m.max, v)
	m.mu.Unlock()
	m.Histogram.Observe(v)
}

func (m *maxObserver) largest() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return time.Duration(m.max * float64(time.Second))
}

// histogram returns the sample count and sum of h.
func histogram(h prometheus.Histogram) (count uint64, sum time.Duration) {
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		panic(err) // a histogram always writes
	}
	return m.GetHistogram().GetSampleCount(), time.Duration(m.GetHistogram().GetSampleSum() * float64(time.Second))
}

func counter(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err) // a counter always writes
	}
	return m.GetCounter().GetValue()
}

// replayRig is one replica alone in a ring of 7 partitions: a real
// coordinator and core over fakeMembership, driving a real controller
// whose source is a memoryCache. The core's timing is the caller's.
type replayRig struct {
	ctrl    controller.Controller
	ctrlReg *prometheus.Registry
	coord   *coordinator
	member  *cutMembership
	cache   *memoryCache
	step    *maxObserver
	exited  chan int
	stop    func()
}

func startReplayRig(tb testing.TB, cache *memoryCache, leaseDuration, renewDeadline time.Duration, wrap func(Participant) Participant) *replayRig {
	tb.Helper()
	ring := shard.Config{Partitions: 7}
	r := &replayRig{cache: cache, member: &cutMembership{fakeMembership: newFakeMembership("a")}, ctrlReg: prometheus.NewRegistry(), exited: make(chan int, 1)}
	ctrl, err := controller.New("replay", controller.ReconcilerFunc(func(context.Context, controller.Request) (controller.Result, error) {
		return controller.Result{}, nil
	}), controller.Options{Partitioner: shard.NewPartitioner(ring.Partitions), StartInactive: true, Registerer: r.ctrlReg, Logger: logr.Discard()})
	if err != nil {
		tb.Fatal(err)
	}
	if err := ctrl.Watch(cache); err != nil {
		tb.Fatal(err)
	}
	r.ctrl = ctrl
	core, err := handoff.New(handoff.Config{Identity: "a", Incarnation: "inc-a", Ring: ring,
		Timing: shard.Timing{LeaseDuration: leaseDuration, RenewDeadline: renewDeadline}})
	if err != nil {
		tb.Fatal(err)
	}
	metrics, err := newRingMetrics(prometheus.NewRegistry())
	if err != nil {
		tb.Fatal(err)
	}
	r.step = &maxObserver{Histogram: metrics.step}
	metrics.step = r.step
	var part Participant = ctrl
	if wrap != nil {
		part = wrap(part)
	}
	r.coord = newCoordinatorWith(core, r.member, []Participant{part}, metrics, logr.Discard(), shard.Timing{LeaseDuration: leaseDuration, RenewDeadline: renewDeadline}, func(code int) { r.exited <- code })

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := ctrl.Start(ctx); err != nil {
			tb.Errorf("controller: %v", err)
		}
	})
	wg.Go(func() {
		if err := r.coord.run(ctx, func(ctx context.Context) bool { return ctrl.WaitForSync(ctx) == nil }); err != nil {
			tb.Errorf("coordinator: %v", err)
		}
	})
	r.stop = func() {
		cache.resume()
		cancel()
		wg.Wait()
	}
	return r
}

// admitted is the controller's count of requests the gate let in.
func (r *replayRig) admitted(tb testing.TB) float64 {
	tb.Helper()
	families, err := r.ctrlReg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "kshard_gate_decisions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "decision" && l.GetValue() == "admitted" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// BenchmarkActivationReplay100k measures, for a replica alone in its ring
// activating every partition over a cache of 100,000 objects, the longest
// coordinator step and the activation replay (kshard_coordinator_step_seconds
// and kshard_activation_replay_seconds), and counts fences: with
// RenewDeadline 200ms, a step that holds the loop longer than that fences
// the replica although its renewals succeed, and the replica replays
// again when it rejoins (on a loaded machine, a renewal delayed past
// RenewDeadline fences too). Run it with -benchtime=Nx; each iteration
// waits LeaseDuration (300ms) before its replica joins.
func BenchmarkActivationReplay100k(b *testing.B) {
	const objects = 100_000
	var maxStep, replay, steps, first time.Duration
	var stepCount, replays uint64
	var fences float64
	for range b.N {
		b.StopTimer()
		cache := newMemoryCache(objects, -1)
		rig := startReplayRig(b, cache, 300*time.Millisecond, 200*time.Millisecond, nil)
		stopRenewing := renewEvery(rig.member.fakeMembership, 20*time.Millisecond)
		b.StartTimer()
		select {
		case <-cache.finished:
		case <-time.After(time.Minute):
			b.Fatal("the replay did not finish within a minute")
		}
		// The replay histogram is observed just after the source returns.
		for deadline := time.Now().Add(10 * time.Second); ; {
			if n, _ := histogram(rig.coord.metrics.replay); n > 0 {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("the replay was not reported")
			}
			time.Sleep(time.Millisecond) // polling a condition, not synchronising
		}
		b.StopTimer()
		// The workers feed the replay's requests to the queue a few at a
		// time (controller's replay backlog): await them all.
		for deadline := time.Now().Add(time.Minute); rig.admitted(b) < objects; {
			if time.Now().After(deadline) {
				b.Fatalf("%v requests admitted a minute after the replay, want at least %d", rig.admitted(b), objects)
			}
			time.Sleep(10 * time.Millisecond) // polling a condition, not synchronising
		}
		stopRenewing()
		rig.stop()
		maxStep = max(maxStep, rig.step.largest())
		cache.mu.Lock()
		first += cache.firstTook
		cache.mu.Unlock()
		n, sum := histogram(rig.coord.metrics.replay)
		replays += n
		replay += sum
		n, sum = histogram(rig.step)
		stepCount += n
		steps += sum
		var m dto.Metric
		if err := rig.coord.metrics.fences.Write(&m); err != nil {
			b.Fatal(err)
		}
		fences += m.GetCounter().GetValue()
		b.StartTimer()
	}
	b.ReportMetric(float64(maxStep)/float64(time.Millisecond), "max-step-ms")
	b.ReportMetric(float64(steps)/float64(stepCount)/float64(time.Millisecond), "mean-step-ms")
	b.ReportMetric(float64(replay)/float64(replays)/float64(time.Millisecond), "ms/replay")
	b.ReportMetric(float64(first)/float64(b.N)/float64(time.Millisecond), "first-replay-ms")
	b.ReportMetric(float64(replays)/float64(b.N), "replays/op")
	b.ReportMetric(fences/float64(b.N), "fences/op")
}

// cutMembership is fakeMembership whose Lease writes stop landing while
// cut, as when the API server is unreachable; like membership.Member, it writes
// the latest Record once it can again.
type cutMembership struct {
	*fakeMembership
	mu      sync.Mutex
	cut     bool
	pending *handoff.Record
}

func (m *cutMembership) SetDesired(r handoff.Record) {
	m.mu.Lock()
	if m.cut {
		r = r.Clone()
		m.pending = &r
		m.mu.Unlock()
		return
	}
	m.mu.Unlock()
	m.fakeMembership.SetDesired(r)
}

func (m *cutMembership) setCut(cut bool) {
	m.mu.Lock()
	m.cut = cut
	pending := m.pending
	if !cut {
		m.pending = nil
	}
	m.mu.Unlock()
	if !cut && pending != nil {
		m.fakeMembership.SetDesired(*pending)
	}
}

// renewEvery renews member's own Lease every period, as membership.Member
// would, until the returned function is called, which waits for it.
func renewEvery(member *fakeMembership, period time.Duration) (stop func()) {
	stopCh, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-stopCh:
				return
			case <-tick.C:
				member.mu.Lock()
				if member.own != nil {
					member.renewed = time.Now()
				}
				member.mu.Unlock()
				member.notify()
			}
		}
	}()
	return func() { close(stopCh); <-done }
}
