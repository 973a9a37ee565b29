package crshard

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/kshard/kshard/shard"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// BenchmarkQueueAddGetDone is the adapter's cost per request on the hot
// path (the gate at Add, Enter at Get, Exit at Done) beside
// controller-runtime's own priority queue alone.
func BenchmarkQueueAddGetDone(b *testing.B) {
	reqs := make([]reconcile.Request, 2000)
	for i := range reqs {
		reqs[i] = req("obj-" + strconv.Itoa(i))
	}
	run := func(b *testing.B, q priorityqueue.PriorityQueue[reconcile.Request]) {
		defer q.ShutDown()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			r := reqs[i%len(reqs)]
			q.AddWithOpts(priorityqueue.AddOpts{}, r)
			got, _ := q.Get()
			q.Done(got)
		}
	}
	b.Run("priorityqueue", func(b *testing.B) {
		run(b, priorityqueue.New[reconcile.Request]("bench"))
	})
	b.Run("gated", func(b *testing.B) {
		r, err := New(unreachable(), Options{Ring: "test", LeaseNamespace: "ns", Identity: "r-0", DrainGracePeriod: time.Second, Registerer: prometheus.NewRegistry()})
		if err != nil {
			b.Fatal(err)
		}
		valid := shard.Validity{Until: time.Now().Add(time.Hour), Epoch: 1}
		r.validity = func() shard.Validity { return valid }
		if err := r.admit(context.Background(), r.only(reqs...)); err != nil {
			b.Fatal(err)
		}
		_, q := newQueue(r, true)
		run(b, q)
	})
}
