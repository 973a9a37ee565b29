package crshard

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kshard/kshard/shard/fence"
)

// metrics are the adapter's own kshard_* metrics, named as kshard's
// controllers name them; the ring's and the Lease's come from
// the ring coordinator and the Lease membership (ring.NewReplica).
type metrics struct {
	gate          *prometheus.CounterVec // controller, decision
	refused       *prometheus.CounterVec // controller
	drainOverdue  *prometheus.CounterVec // controller
	writesRefused *prometheus.CounterVec // reason
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		gate: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kshard_gate_decisions_total",
			Help: "Requests seen by the shard gate, by decision: admitted (partition active), foreign (not active here, dropped at enqueue), inactive (revoked after it was queued, dropped when dequeued).",
		}, []string{"controller", "decision"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kshard_reconcile_refused_total",
			Help: "Reconciles not started because the replica's lease validity had passed (requeued).",
		}, []string{"controller"}),
		drainOverdue: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kshard_drain_overdue_total",
			Help: "Drains that outlived their report threshold (they keep waiting), by controller: each controller with a reconcile of the drained partitions still in flight counts one, as kshard's controllers count their own.",
		}, []string{"controller"}),
		writesRefused: fence.NewWritesRefused(),
	}
	for _, c := range []prometheus.Collector{m.gate, m.refused, m.drainOverdue, m.writesRefused} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("crshard: registering metrics: %w (one ring per process and registry: pass Options.Registerer for more)", err)
			}
			return nil, fmt.Errorf("crshard: registering metrics: %w", err)
		}
	}
	return m, nil
}
