package controller_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/internal/controllertest"
	"github.com/kshard/kshard/internal/testwait"
)

// statusWriter reconciles ConfigMap team/w the way an operator that
// records status on every reconcile does: each reconcile writes the object
// back with a new status (here a data key) and an unchanged
// metadata.generation, as a write to a status subresource leaves it. It
// stops writing after limit writes, so that the loop this creates without a
// filter is bounded.
type statusWriter struct {
	m     *controllertest.Manager
	limit int

	mu         sync.Mutex
	generation int64
	reconciles int
}

func (s *statusWriter) Reconcile(_ context.Context, r controller.Request) (controller.Result, error) {
	if r.Name != "w" {
		return controller.Result{}, nil
	}
	s.mu.Lock()
	s.reconciles++
	n, gen := s.reconciles, s.generation
	s.mu.Unlock()
	if n > s.limit {
		return controller.Result{}, nil
	}
	return controller.Result{}, s.m.Cache.Update(statusObject("w", gen, strconv.Itoa(n)))
}

func (s *statusWriter) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reconciles
}

// setSpec is a user's spec change: the API server bumps the generation.
func (s *statusWriter) setSpec(gen int64) error {
	s.mu.Lock()
	s.generation = gen
	s.mu.Unlock()
	return s.m.Cache.Update(statusObject("w", gen, "spec changed"))
}

func statusObject(name string, generation int64, status string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: types.UID("uid-" + name), Generation: generation},
		Data:       map[string]string{"status": status},
	}
}

// startStatusWriter runs a controller For ConfigMaps with preds over a
// statusWriter, with w created at generation 1.
func startStatusWriter(t *testing.T, limit int, preds ...controller.Predicate) (*statusWriter, *prometheus.Registry) {
	t.Helper()
	m := newManager()
	reg := prometheus.NewRegistry()
	m.ControllerOptions.Registerer = reg
	s := &statusWriter{m: m, limit: limit, generation: 1}
	if err := controller.NewControllerManagedBy(m).For(&corev1.ConfigMap{}, preds...).Complete(s); err != nil {
		t.Fatal(err)
	}
	if err := m.Cache.Add(statusObject("w", 1, "")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return s, reg
}

// admitted is the controller's count of requests the gate queued.
func admitted(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "kshard_gate_decisions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "decision" && l.GetValue() == "admitted" {
					return int(m.GetCounter().GetValue())
				}
			}
		}
	}
	return 0
}

// TestStatusWritesReenqueueWithoutAFilter shows the trap the predicate docs
// warn about: a reconciler that writes its object's status is re-enqueued
// by its own write, so it reconciles again and writes again, without end
// (here until the test's limit).
func TestStatusWritesReenqueueWithoutAFilter(t *testing.T) {
	const limit = 20
	for _, tc := range []struct {
		name  string
		preds []controller.Predicate
	}{
		{"no predicate", nil},
		// Changed resourceVersion is every write, the reconciler's own included.
		{"ResourceVersionChangedPredicate", []controller.Predicate{controller.ResourceVersionChangedPredicate{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := startStatusWriter(t, limit, tc.preds...)
			testwait.True(t, 30*time.Second, "the reconciler re-enqueued by its own writes", func() bool { return s.count() > limit })
		})
	}
}

// TestGenerationChangedPredicateEndsTheStatusWriteLoop: with the filter, the
// reconciler's status write is not an event for it; a spec change (a new
// generation) still is.
func TestGenerationChangedPredicateEndsTheStatusWriteLoop(t *testing.T) {
	s, reg := startStatusWriter(t, 1000, controller.GenerationChangedPredicate{})
	testwait.True(t, 30*time.Second, "the first reconcile", func() bool { return s.count() >= 1 })

	// Wait until the informer has delivered an object created after the
	// reconciler's status write: events are delivered in order, so by then
	// the status write was filtered or queued, and the gate has counted
	// every request queued so far.
	barrier := func(name string, wantAdmitted int) {
		t.Helper()
		if err := s.m.Cache.Add(statusObject(name, 1, "")); err != nil {
			t.Fatal(err)
		}
		testwait.True(t, 30*time.Second, name+" admitted", func() bool { return admitted(t, reg) >= wantAdmitted })
		if got := admitted(t, reg); got != wantAdmitted {
			t.Fatalf("%d requests admitted, want %d: the reconciler's status write re-enqueued it", got, wantAdmitted)
		}
	}
	// The status write happens inside the first reconcile, which has ended
	// (count is 1 only after it started; wait for the write to be observed).
	testwait.True(t, 30*time.Second, "the status write reaches the cache", func() bool {
		obj, exists, err := cacheGet(t, s.m, "w")
		return err == nil && exists && obj.Data["status"] == "1"
	})
	barrier("marker-1", 2) // w's creation, marker-1

	if err := s.setSpec(2); err != nil {
		t.Fatal(err)
	}
	testwait.True(t, 30*time.Second, "the spec change reconciled", func() bool { return s.count() == 2 })
	testwait.True(t, 30*time.Second, "the second status write reaches the cache", func() bool {
		obj, exists, err := cacheGet(t, s.m, "w")
		return err == nil && exists && obj.Data["status"] == "2"
	})
	barrier("marker-2", 4) // + the spec change, marker-2
	if got := s.count(); got != 2 {
		t.Fatalf("w reconciled %d times, want 2 (creation, spec change)", got)
	}
}

// cacheGet reads a ConfigMap of namespace team from the manager's informer.
func cacheGet(t *testing.T, m *controllertest.Manager, name string) (*corev1.ConfigMap, bool, error) {
	t.Helper()
	inf, err := m.Cache.Informer(context.Background(), &corev1.ConfigMap{})
	if err != nil {
		return nil, false, err
	}
	obj, exists, err := inf.GetStore().GetByKey("team/" + name)
	if err != nil || !exists {
		return nil, exists, err
	}
	return obj.(*corev1.ConfigMap), true, nil
}
