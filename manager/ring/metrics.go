package ring

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kshard/kshard/shard"
)

// ringMetrics are the kshard_* series describing this replica's view of the
// ring; the controller package reports the reconcile-side ones.
type ringMetrics struct {
	members    prometheus.Gauge
	weighed    prometheus.Gauge
	partitions *prometheus.GaugeVec
	rebalances prometheus.Counter
	handoff    prometheus.Histogram
	ready      prometheus.Gauge
	fences     prometheus.Counter
	// step is the latency of one coordinator step (observe, decide, carry
	// out, admissions included); replay the duration of one activation's
	// cache replay in every participant, which runs off the loop.
	step   prometheus.Histogram
	replay prometheus.Histogram
}

func newRingMetrics(reg prometheus.Registerer) (*ringMetrics, error) {
	m := &ringMetrics{
		members: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kshard_ring_members", Help: "Members of the ring (live Leases in state active) in this replica's view.",
		}),
		weighed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kshard_ring_weighed_partitions", Help: "In a balanced ring (Balance), the partitions whose object count some live Lease reports, in this replica's view: the ring is placed by the counts only when all are known, by number otherwise. 0 without Balance.",
		}),
		partitions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kshard_partitions", Help: "Partitions of this replica by state: target (owned under the current view), claimed (published in its Lease), active (being reconciled), draining (revoked, reconciles still running), blocked (targeted but still claimed by a peer), handing_over (out of the target, kept active until the new owner's sharded cache holds them), caching (free to activate, waiting for this replica's sharded cache).",
		}, []string{"state"}),
		rebalances: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kshard_rebalances_total", Help: "Changes of this replica's target partitions.",
		}),
		handoff: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kshard_handoff_seconds",
			Help:    "Time from a partition entering this replica's target to its activation here.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60},
		}),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kshard_ready", Help: "1 when caches are synced and this replica has joined the ring.",
		}),
		fences: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kshard_fences_total", Help: "Times this replica stopped every reconcile because its Lease renewals failed for RenewDeadline or its own Lease was deleted, relabelled or damaged by someone else.",
		}),
		step: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kshard_coordinator_step_seconds",
			Help:    "Latency of one step of the ring coordinator: feeding the handoff core, deciding, and carrying out its Ready (admitting activated partitions included; their cache replay runs off the loop). A step that outlasts RenewDeadline − RenewPeriod delays fencing.",
			Buckets: []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10},
		}),
		replay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kshard_activation_replay_seconds",
			Help:    "Duration of one activation replay: enqueueing the cached objects of newly admitted partitions, in every participant. It runs off the coordinator's loop; a failed replay counts too, and is retried.",
			Buckets: []float64{0.0001, 0.001, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30},
		}),
	}
	for _, c := range []prometheus.Collector{m.members, m.weighed, m.partitions, m.rebalances, m.handoff, m.ready, m.fences, m.step, m.replay} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *ringMetrics) setPartitions(state string, s shard.PartitionSet) {
	m.partitions.WithLabelValues(state).Set(float64(s.Len()))
}
