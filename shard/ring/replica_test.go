package ring

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/kshard/kshard/shard"
)

// NewReplica matches the Lease member and the handoff core's configuration
// (identity, incarnation, ring, timings) and refuses what either would.
func TestNewReplica(t *testing.T) {
	base := ReplicaOptions{
		Config: &rest.Config{Host: "https://127.0.0.1:1"}, Namespace: "ns", Ring: "r", Identity: "r-0",
		RingConfig: shard.Config{Partitions: 64}, Timing: shard.Timing{LeaseDuration: 6 * time.Second},
		KeepPlaceOnLeave: true, Registerer: prometheus.NewRegistry(),
	}
	r, err := NewReplica(base)
	if err != nil {
		t.Fatalf("NewReplica: %v", err)
	}
	h := r.handoff
	if h.Identity != "r-0" || h.Incarnation == "" || h.Incarnation != r.Member.Incarnation() {
		t.Errorf("handoff identity/incarnation = %q/%q, member's incarnation %q", h.Identity, h.Incarnation, r.Member.Incarnation())
	}
	if h.Ring.Partitions != 64 || h.LeaseDuration != 6*time.Second || h.RenewDeadline != 4*time.Second || !h.KeepPlaceOnLeave {
		t.Errorf("handoff config = %+v: want 64 partitions, the given lease duration and its derived deadline, KeepPlaceOnLeave", h)
	}
	again, err := NewReplica(ReplicaOptions{Config: base.Config, Namespace: "ns", Ring: "r", Identity: "r-0", Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if again.handoff.Incarnation == h.Incarnation {
		t.Error("two replicas share an incarnation")
	}

	for name, tc := range map[string]struct {
		mutate func(*ReplicaOptions)
		want   string
	}{
		"no config":   {func(o *ReplicaOptions) { o.Config = nil }, "Config is nil"},
		"no identity": {func(o *ReplicaOptions) { o.Identity = "" }, "dentity"},
		"bad timings": {func(o *ReplicaOptions) { o.Timing.RenewDeadline = 10 * time.Second }, "RenewDeadline"},
		"bad ring":    {func(o *ReplicaOptions) { o.RingConfig.Partitions = -1 }, "artitions"},
	} {
		t.Run(name, func(t *testing.T) {
			o := base
			o.Registerer = prometheus.NewRegistry()
			tc.mutate(&o)
			if _, err := NewReplica(o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
}
