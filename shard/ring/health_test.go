package ring

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/shard"
)

// healthCoordinator is a coordinator with only what the health gauges
// read: metrics, timing and the ring's configuration.
func healthCoordinator(t *testing.T) (*coordinator, shard.Config) {
	t.Helper()
	metrics, err := newRingMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	c := newCoordinatorWith(nil, nil, nil, metrics, logr.Discard(), shard.Timing{LeaseDuration: 10 * time.Second}, nil)
	c.ringCfg = shard.Config{Partitions: 7}.WithDefaults()
	c.fingerprint = c.ringCfg.Fingerprint()
	return c, c.ringCfg
}

func set(partitions int, ps ...int) shard.PartitionSet {
	s := shard.NewPartitionSet(partitions)
	for _, p := range ps {
		s.Add(p)
	}
	return s
}

func observed(id, fingerprint string, claim shard.PartitionSet, seen time.Time) membership.Observed {
	o := membership.Observed{Name: "ring-" + id, LastChange: seen}
	o.Identity, o.State, o.Claim, o.Fingerprint, o.Incarnation = id, handoff.StateActive, claim, fingerprint, "inc-"+id
	return o
}

func gauges(c *coordinator) [4]float64 {
	m := c.metrics
	return [4]float64{testutil.ToFloat64(m.unclaimed), testutil.ToFloat64(m.overlapping),
		testutil.ToFloat64(m.malformed), testutil.ToFloat64(m.foreign)}
}

// TestHealthGauges: a view with a partition nobody live claims, one two
// live Leases claim, a malformed Lease and a live one of another ring
// configuration reads 1 on each gauge; judged later, when every Lease has
// gone unchanged for LeaseDuration on the replica's clock, every partition
// is unclaimed and the foreign Lease no longer counts.
func TestHealthGauges(t *testing.T) {
	c, cfg := healthCoordinator(t)
	P := cfg.Partitions
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	malformed := observed("m", c.fingerprint, shard.PartitionSet{}, t0)
	malformed.Problem, malformed.ClaimUnknown = `claim annotation "v9:7:zz" does not decode`, true
	view := []membership.Observed{
		observed("a", c.fingerprint, set(P, 1, 2, 3), t0),
		observed("b", c.fingerprint, set(P, 3, 4, 5, 6), t0.Add(-time.Second)),
		observed("x", c.fingerprint, set(P, 0), t0.Add(-20*time.Second)), // expired
		malformed,
		observed("f", "xx1-p97-l1.05-r40", set(97, 0), t0),
	}
	c.observeHealth(t0, view)
	if got, want := gauges(c), [4]float64{1, 1, 1, 1}; got != want {
		t.Errorf("unclaimed, overlapping, malformed, foreign = %v, want %v", got, want)
	}
	c.observeHealth(t0.Add(time.Minute), view)
	if got, want := gauges(c), [4]float64{float64(P), 0, 1, 0}; got != want {
		t.Errorf("a minute later: unclaimed, overlapping, malformed, foreign = %v, want %v", got, want)
	}
	healthy := []membership.Observed{observed("a", c.fingerprint, set(P, 0, 1, 2, 3), t0), observed("b", c.fingerprint, set(P, 4, 5, 6), t0)}
	c.observeHealth(t0, healthy)
	if got := gauges(c); got != [4]float64{} {
		t.Errorf("settled ring: unclaimed, overlapping, malformed, foreign = %v, want all 0", got)
	}
}

// TestHealthGaugesOffWithoutRing: a coordinator without the ring's
// configuration (the simulation's) leaves the gauges at 0.
func TestHealthGaugesOffWithoutRing(t *testing.T) {
	c, _ := healthCoordinator(t)
	c.ringCfg = shard.Config{}
	c.observeHealth(time.Now(), []membership.Observed{observed("a", "", set(7), time.Now())})
	if got := gauges(c); got != [4]float64{} {
		t.Errorf("gauges = %v, want all 0", got)
	}
}

// TestOldestPendingGauge: each phase reads the age of its oldest partition
// still in it, and 0 once none is.
func TestOldestPendingGauge(t *testing.T) {
	c, cfg := healthCoordinator(t)
	P := cfg.Partitions
	age := func(phase string) float64 { return testutil.ToFloat64(c.metrics.oldest.WithLabelValues(phase)) }
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	c.targetSince = map[int]time.Time{0: t0, 1: t0.Add(5 * time.Second)}
	none := shard.NewPartitionSet(P)
	c.observePending(t0.Add(10*time.Second), set(P, 0, 1), set(P, 0), set(P, 4), set(P, 5))
	c.observePending(t0.Add(40*time.Second), set(P, 0, 1), set(P, 0), set(P, 4, 6), set(P, 5))
	for phase, want := range map[string]float64{phaseTakeover: 35, phaseDrain: 30, phaseHandover: 30} {
		if got := age(phase); got != want {
			t.Errorf("%s: %v s, want %v", phase, got, want)
		}
	}
	c.observePending(t0.Add(50*time.Second), set(P, 0, 1), set(P, 0, 1), set(P, 6), none)
	for phase, want := range map[string]float64{phaseTakeover: 0, phaseDrain: 10, phaseHandover: 0} {
		if got := age(phase); got != want {
			t.Errorf("later, %s: %v s, want %v", phase, got, want)
		}
	}
}
