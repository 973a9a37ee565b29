package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

func TestFamiliesAreSharedPerRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := Register(reg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Register(reg)
	if err != nil {
		t.Fatalf("second Register on the same registry: %v", err)
	}
	if a.reconcileTotal != b.reconcileTotal || a.depth != b.depth {
		t.Fatal("the second Register did not adopt the registered families")
	}
	if !a.Claim("c") || b.Claim("c") {
		t.Fatal("a name must be claimable once per registry, whichever Families value claims it")
	}
	other, _ := Register(prometheus.NewRegistry())
	if !other.Claim("c") {
		t.Fatal("another registry must not see the first one's names")
	}
}

func TestConflictingCollectorIsAnError(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "workqueue_depth", Help: "something else"}))
	if _, err := Register(reg); err == nil {
		t.Fatal("registering over a different workqueue_depth must fail")
	}
}

func TestQueueMetricsCarryNameAndController(t *testing.T) {
	reg := prometheus.NewRegistry()
	f, _ := Register(reg)
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "ctl", MetricsProvider: f.QueueProvider("ctl")})
	defer q.ShutDown()
	q.Add("a")
	q.Add("b")
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "workqueue_adds_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			if strings.Join(labels, ",") == "controller=ctl,name=ctl" && m.GetCounter().GetValue() == 2 {
				found = true
			}
		}
	}
	if !found {
		t.Fatal("workqueue_adds_total{controller=ctl,name=ctl} = 2 not found")
	}
}
