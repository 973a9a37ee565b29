package manager

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/internal/testwait"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/shard/ringstatus"
)

// gauge reads an unlabelled gauge from a /metrics body; ok is false when
// the series is absent.
func gauge(body, name string) (float64, bool) {
	for line := range strings.Lines(body) {
		if rest, found := strings.CutPrefix(line, name+" "); found {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// TestRingHealthGauges: on a real API server, a replica's ring health
// gauges read what `kshard status` reads from the same Leases — 0 in a
// settled ring, a malformed Lease once one is created, and a Lease of
// another ring configuration as foreign while its replica runs — and the
// oldest pending move is 0 once the ring has settled.
func TestRingHealthGauges(t *testing.T) {
	ctx := context.Background()
	ns := "it-health"
	cfg, cs := newTestRing(t, ns)
	j := &journal{}
	r0 := startReplica(t, cfg, ns, "r-0", j, time.Millisecond)
	testwait.For(t, 30*time.Second, "r-0 to own the ring", func() (bool, string) { return ringSettled(ctx, cs, ns, "r-0") })

	// expect waits until r-0's gauges read want and agree with
	// ringstatus (kshard status) on the Leases at that moment.
	expect := func(what string, want map[string]float64) {
		t.Helper()
		testwait.For(t, 20*time.Second, what, func() (bool, string) {
			code, body := get("http://" + r0.mgr.MetricsAddr() + "/metrics")
			if code != http.StatusOK {
				return false, fmt.Sprintf("/metrics: %d", code)
			}
			got := map[string]float64{}
			for name := range want {
				v, ok := gauge(body, name)
				if !ok {
					return false, name + " missing from /metrics"
				}
				got[name] = v
			}
			for name, v := range want {
				if got[name] != v {
					return false, fmt.Sprintf("gauges %v, want %v", got, want)
				}
			}
			st, err := ringstatus.Read(ctx, cs, ns, "it")
			if err != nil {
				return false, err.Error()
			}
			status := map[string]float64{"kshard_ring_unclaimed_partitions": float64(st.Unclaimed),
				"kshard_ring_overlapping_partitions": float64(st.Overlapping), "kshard_ring_malformed_leases": float64(st.Malformed)}
			for name, v := range status {
				if w, ok := want[name]; ok && w != v {
					return false, fmt.Sprintf("kshard status reads %s %v, the gauge %v", name, v, w)
				}
			}
			return true, ""
		})
	}
	expect("a settled ring's gauges", map[string]float64{
		"kshard_ring_members": 1, "kshard_ring_unclaimed_partitions": 0, "kshard_ring_overlapping_partitions": 0,
		"kshard_ring_malformed_leases": 0, "kshard_ring_foreign_leases": 0,
	})
	code, body := get("http://" + r0.mgr.MetricsAddr() + "/metrics")
	for _, phase := range []string{"takeover", "drain", "handover"} {
		series := `kshard_ring_oldest_pending_seconds{phase="` + phase + `"} 0`
		if code != http.StatusOK || !strings.Contains(body, series) {
			t.Errorf("settled ring: /metrics lacks %q", series)
		}
	}

	// A Lease with the ring label in no known state: malformed, with an
	// empty claim (so it blocks nothing once expired).
	holder := "bogus"
	bogus := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "it-bogus", Namespace: ns,
			Labels:      map[string]string{lease.LabelRing: "it", membership.LabelState: "sleeping"},
			Annotations: map[string]string{membership.AnnotationIncarnation: "x", membership.AnnotationGeneration: "1"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}
	if _, err := cs.CoordinationV1().Leases(ns).Create(ctx, bogus, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("the malformed Lease to be counted", map[string]float64{"kshard_ring_malformed_leases": 1})

	// A replica of another partition count refuses to join and claims
	// nothing, but its live Lease disagrees with r-0's fingerprint.
	startReplica(t, cfg, ns, "r-1", j, time.Millisecond, func(o *Options) { o.Partitions = 1021 })
	expect("the other configuration's Lease to be counted as foreign", map[string]float64{
		// (the bogus Lease may be garbage-collected by now: 10 × LeaseDuration)
		"kshard_ring_foreign_leases": 1, "kshard_ring_unclaimed_partitions": 0,
	})
}
