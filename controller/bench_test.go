package controller

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"

	"github.com/kshard/kshard/controller/internal/metrics"
	"github.com/kshard/kshard/shard"
)

// directQueue is the gate-less path: requests go straight to the workqueue.
type directQueue struct {
	queue workqueue.TypedRateLimitingInterface[Request]
}

func (d *directQueue) Add(r Request) { d.queue.Add(r) }

// eventPath builds the informer-to-queue path of a controller over n
// objects: event adapter, predicates (none), EnqueueRequestForObject, then
// either the shard gate or the direct queue.
func eventPath(tb testing.TB, n int, gated bool, active shard.PartitionSet) (*eventAdapter, []*corev1.ConfigMap, func()) {
	tb.Helper()
	families, err := metrics.Register(newRegistry())
	if err != nil {
		tb.Fatal(err)
	}
	opts := Options{StartInactive: true}.withDefaults()
	c := newController("bench", ReconcilerFunc(noop), opts, families)
	for p := range active.All() {
		c.gate.Activate(p)
	}
	q := workqueue.NewTypedRateLimitingQueueWithConfig(opts.RateLimiter, workqueue.TypedRateLimitingQueueConfig[Request]{
		Name: "bench", MetricsProvider: families.QueueProvider("bench"),
	})
	var target Queue = &directQueue{queue: q}
	if gated {
		target = &eventQueue{c: c, queue: q}
	}
	objs := make([]*corev1.ConfigMap, n)
	for i := range objs {
		objs[i] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: "namespace-" + strconv.Itoa(i%100), Name: "configmap-" + strconv.Itoa(i), ResourceVersion: "1"}}
	}
	a := &eventAdapter{ctx: context.Background(), handler: EnqueueRequestForObject{}, q: target}
	// Queue every object once, so the measured events find their request
	// pending, as events on busy objects do.
	for _, o := range objs {
		a.OnAdd(o, false)
	}
	return a, objs, q.ShutDown
}

// BenchmarkEventPath measures update events through handler + (gate) +
// queue over 100k objects. "gated" minus "ungated" is the gate's cost.
func BenchmarkEventPath(b *testing.B) {
	const n = 100_000
	all := shard.FullPartitionSet(shard.DefaultPartitions)
	half := shard.NewPartitionSet(shard.DefaultPartitions)
	for p := 0; p < shard.DefaultPartitions; p += 2 {
		half.Add(p)
	}
	for _, bc := range []struct {
		name   string
		gated  bool
		active shard.PartitionSet
	}{
		{"ungated", false, all},
		{"gated/all-active", true, all},
		{"gated/half-active", true, half},
	} {
		b.Run(bc.name, func(b *testing.B) {
			a, objs, stop := eventPath(b, n, bc.gated, bc.active)
			defer stop()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				o := objs[i%n]
				a.OnUpdate(o, o)
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkGate measures the gate alone: partition of the request, active
// check and decision counter.
func BenchmarkGate(b *testing.B) {
	families, _ := metrics.Register(newRegistry())
	c := newController("gate", ReconcilerFunc(noop), Options{}.withDefaults(), families)
	reqs := make([]Request, 1024)
	for i := range reqs {
		reqs[i] = req("namespace-"+strconv.Itoa(i%100), "configmap-"+strconv.Itoa(i))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r := reqs[i&1023]
		if c.gate.Active(c.parts.Of(r.Namespace, r.Name)) {
			c.metrics.Admitted.Inc()
		}
		i++
	}
}

// TestGateAddsNoAllocations checks that an event costs no more allocations
// through the gate than without it.
func TestGateAddsNoAllocations(t *testing.T) {
	measure := func(gated bool) float64 {
		a, objs, stop := eventPath(t, 1000, gated, shard.FullPartitionSet(shard.DefaultPartitions))
		defer stop()
		i := 0
		return testing.AllocsPerRun(2000, func() {
			o := objs[i%len(objs)]
			a.OnUpdate(o, o)
			i++
		})
	}
	ungated, gated := measure(false), measure(true)
	if gated > ungated {
		t.Fatalf("the gate adds allocations: %.2f per event gated, %.2f ungated", gated, ungated)
	}
}

// BenchmarkReconcileThroughput measures no-op reconciles per second through
// the whole loop (gate, queue, workers, metrics) with 1, 4 and 16 workers.
func BenchmarkReconcileThroughput(b *testing.B) {
	for _, workers := range []int{1, 4, 16} {
		b.Run("workers="+strconv.Itoa(workers), func(b *testing.B) {
			var done atomic.Int64
			all := make(chan struct{})
			target := int64(b.N)
			r := ReconcilerFunc(func(context.Context, Request) (Result, error) {
				if done.Add(1) == target {
					close(all)
				}
				return Result{}, nil
			})
			reg := newRegistry()
			ci, err := New("throughput", r, Options{MaxConcurrentReconciles: workers, Registerer: reg})
			if err != nil {
				b.Fatal(err)
			}
			src := &queueSource{}
			_ = ci.Watch(src)
			ctx, cancel := context.WithCancel(context.Background())
			stopped := make(chan struct{})
			go func() { _ = ci.Start(ctx); close(stopped) }()
			<-src.readyCh()
			reqs := make([]Request, b.N)
			for i := range reqs {
				reqs[i] = req("ns", "obj-"+strconv.Itoa(i))
			}
			b.ResetTimer()
			for _, r := range reqs {
				src.Add(r)
			}
			<-all
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reconciles/s")
			cancel()
			<-stopped
		})
	}
}

// BenchmarkGateOverhead runs the gated and the gate-less event paths over
// the same 100k objects in alternating batches, so that load from other
// processes hits both alike, and reports each path's cost and their
// difference (the gate's cost per event).
func BenchmarkGateOverhead(b *testing.B) {
	const n, batch = 100_000, 1000
	all := shard.FullPartitionSet(shard.DefaultPartitions)
	plain, objs, stopPlain := eventPath(b, n, false, all)
	defer stopPlain()
	gated, gobjs, stopGated := eventPath(b, n, true, all)
	defer stopGated()
	var plainNs, gatedNs time.Duration
	events := 0
	i := 0
	for b.Loop() {
		start := time.Now()
		for k := range batch {
			o := objs[(i+k)%n]
			plain.OnUpdate(o, o)
		}
		mid := time.Now()
		for k := range batch {
			o := gobjs[(i+k)%n]
			gated.OnUpdate(o, o)
		}
		gatedNs += time.Since(mid)
		plainNs += mid.Sub(start)
		i += batch
		events += batch
	}
	p, g := float64(plainNs)/float64(events), float64(gatedNs)/float64(events)
	b.ReportMetric(p, "ungated-ns/event")
	b.ReportMetric(g, "gated-ns/event")
	b.ReportMetric(g-p, "gate-ns/event")
}
