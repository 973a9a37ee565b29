package ring

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kshard/kshard/internal/ringhealth"
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
	// The ring's health in this replica's view of the Leases
	// (ringhealth.ViewHealth), and the age of the oldest partition move
	// under way here, by phase (see pendingPhases).
	unclaimed   prometheus.Gauge
	overlapping prometheus.Gauge
	malformed   prometheus.Gauge
	foreign     prometheus.Gauge
	oldest      *prometheus.GaugeVec
}

// The phases of kshard_ring_oldest_pending_seconds: takeover, partitions
// of the target not active yet (the old owner drains, or is waited out);
// drain, partitions revoked here whose reconciles still run; handover,
// partitions out of the target kept active until the new owner's sharded
// cache holds them.
const (
	phaseTakeover = "takeover"
	phaseDrain    = "drain"
	phaseHandover = "handover"
)

var pendingPhases = []string{phaseTakeover, phaseDrain, phaseHandover}

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
		unclaimed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kshard_ring_unclaimed_partitions", Help: "Partitions no live Lease claims, in this replica's view of the ring's Leases (as `kshard status` counts them): nobody reconciles their keys. Briefly above 0 after a replica dies without a proof of death (up to LeaseDuration); 0 when healthy.",
		}),
		overlapping: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kshard_ring_overlapping_partitions", Help: "Partitions more than one live Lease claims, in this replica's view: normal while a drain runs (the new owner claims before the old one releases), a stuck drain if it lasts. 0 when settled.",
		}),
		malformed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kshard_ring_malformed_leases", Help: "Leases carrying the ring label that do not follow the Lease format, in this replica's view (expired ones included, as `kshard status` counts them); a live one blocks every partition. 0 when healthy.",
		}),
		foreign: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kshard_ring_foreign_leases", Help: "Live Leases of the ring whose ring-parameters fingerprint differs from this replica's (another --partitions, hashing or kshard version): the replicas refuse to share a ring with them. 0 when healthy.",
		}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kshard_ring_oldest_pending_seconds", Help: "Age of this replica's oldest partition move under way, by phase: takeover (in the target, not active yet), drain (revoked, reconciles still running), handover (out of the target, kept active until the new owner's sharded cache holds it). 0 when none is under way.",
		}, []string{"phase"}),
	}
	for _, ph := range pendingPhases {
		m.oldest.WithLabelValues(ph).Set(0)
	}
	for _, c := range []prometheus.Collector{m.members, m.weighed, m.partitions, m.rebalances, m.handoff, m.ready, m.fences, m.step, m.replay,
		m.unclaimed, m.overlapping, m.malformed, m.foreign, m.oldest} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *ringMetrics) setPartitions(state string, s shard.PartitionSet) {
	m.partitions.WithLabelValues(state).Set(float64(s.Len()))
}

func (m *ringMetrics) setHealth(h ringhealth.Health) {
	m.unclaimed.Set(float64(h.Unclaimed))
	m.overlapping.Set(float64(h.Overlapping))
	m.malformed.Set(float64(h.Malformed))
	m.foreign.Set(float64(h.Foreign))
}
