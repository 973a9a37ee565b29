package crshard

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// toConfigMap maps a Secret to the ConfigMap of the same name, which need
// not exist: the For replay cannot produce its key.
func toConfigMap(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: "cm-" + o.GetName()}}}
}

func secret(name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
}

// TestWatchesReplayRunsTheHandlerOverObjectsThatPassed: the event of a
// watched object that the gate dropped (its mapped key's partition was not
// active) is replayed through the user's handler when the partition is
// activated, at low priority; an object whose events never reached the
// handler (its predicates filtered them) is not, and one deleted since is
// forgotten.
func TestWatchesReplayRunsTheHandlerOverObjectsThatPassed(t *testing.T) {
	r := newTestRing(t, time.Second)
	c, q := newQueue(r, true)
	defer q.ShutDown()
	w, err := newWatchReplay("Watches(*v1.Secret)", &corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(toConfigMap), clientgoscheme.Scheme, false)
	if err != nil {
		t.Fatal(err)
	}
	c.watches = []*watchReplay{w}
	passed, filtered, gone := secret("passed"), secret("filtered"), secret("gone")
	ctx := context.Background()
	for _, s := range []*corev1.Secret{passed, gone} {
		w.Create(ctx, event.CreateEvent{Object: s}, q) // reaches the handler: its predicates passed
	}
	if n := q.Len(); n != 0 {
		t.Fatalf("queue holds %d requests before activation, want the events dropped by the closed gate", n)
	}
	cache := fake.NewClientBuilder().WithObjects(passed, filtered).Build()
	set := r.only(toConfigMap(ctx, passed)[0], toConfigMap(ctx, filtered)[0], toConfigMap(ctx, gone)[0])
	if err := r.admit(ctx, set); err != nil {
		t.Fatal(err)
	}
	if err := c.replay(ctx, cache, set); err != nil {
		t.Fatal(err)
	}
	if n := q.Len(); n != 1 {
		t.Fatalf("queue holds %d requests after the replay, want 1 (only the passed Secret's)", n)
	}
	got, prio, _ := q.GetWithPriority()
	if want := toConfigMap(ctx, passed)[0]; got != want || prio != handler.LowPriority {
		t.Fatalf("replayed %v at priority %d, want %v at %d", got, prio, want, handler.LowPriority)
	}
	q.Done(got)
	if n := w.remembered(); n != 1 {
		t.Fatalf("%d objects remembered after the replay, want 1 (the deleted one forgotten)", n)
	}
	w.Delete(ctx, event.DeleteEvent{Object: passed}, q)
	if n := w.remembered(); n != 0 {
		t.Fatalf("%d objects remembered after the delete event, want 0", n)
	}
}

// TestReplayKeepsOnlyTheReplayedPartitions: requests a replayed handler
// maps to partitions other than the replayed ones are not enqueued, even
// when those partitions are active (they were replayed when activated).
func TestReplayKeepsOnlyTheReplayedPartitions(t *testing.T) {
	r := newTestRing(t, time.Second)
	c, q := newQueue(r, true)
	defer q.ShutDown()
	both := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		a, b := twoPartitions(r)
		return []reconcile.Request{a, b}
	})
	w, err := newWatchReplay("Watches(*v1.Secret)", &corev1.Secret{}, both, clientgoscheme.Scheme, false)
	if err != nil {
		t.Fatal(err)
	}
	c.watches = []*watchReplay{w}
	ctx := context.Background()
	s := secret("s")
	w.Create(ctx, event.CreateEvent{Object: s}, q)
	a, b := twoPartitions(r)
	if err := r.admit(ctx, r.only(a, b)); err != nil {
		t.Fatal(err)
	}
	if err := c.replay(ctx, fake.NewClientBuilder().WithObjects(s).Build(), r.only(a)); err != nil {
		t.Fatal(err)
	}
	if got, _ := q.Get(); got != a || q.Len() != 0 {
		t.Fatalf("replay of a's partition enqueued %v and %d more, want only %v", got, q.Len(), a)
	}
}

// TestRawSourcesRefusedUnlessAllowed: a raw source, which the ring cannot
// replay, fails the build, naming the source and the opt-out;
// AllowUnreplayed accepts it.
func TestRawSourcesRefusedUnlessAllowed(t *testing.T) {
	mgr := newTestManager(t, false)
	r := newTestRing(t, 0)
	noop := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })
	ch := make(chan event.GenericEvent)
	err := r.NewControllerManagedBy(mgr).Named("rawrefused").For(&corev1.ConfigMap{}).
		WatchesRawSource(source.Channel(ch, &handler.EnqueueRequestForObject{})).Complete(noop)
	if err == nil || !strings.Contains(err.Error(), "WatchesRawSource(channel source") || !strings.Contains(err.Error(), "crshard.AllowUnreplayed()") {
		t.Fatalf("a channel source: %v, want it refused, naming the source and the opt-out", err)
	}
	if n := len(r.controllers); n != 0 {
		t.Fatalf("%d controllers registered after the refusal, want 0", n)
	}
	err = r.NewControllerManagedBy(mgr).Named("rawallowed").For(&corev1.ConfigMap{}).
		WatchesRawSource(source.Channel(ch, &handler.EnqueueRequestForObject{}), AllowUnreplayed()).Complete(noop)
	if err != nil {
		t.Fatalf("with AllowUnreplayed: %v", err)
	}
}

// TestControllerManagedByFindsTheManagersRing: the package-level builder
// opts the controller into the ring set up with the manager, and fails,
// saying what to do, on a manager with none.
func TestControllerManagedByFindsTheManagersRing(t *testing.T) {
	noop := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })
	bare := newTestManager(t, false)
	err := ControllerManagedBy(bare).Named("noring").For(&corev1.ConfigMap{}).Complete(noop)
	if err == nil || !strings.Contains(err.Error(), "ring.SetupWithManager(mgr)") {
		t.Fatalf("on a manager with no ring: %v, want an error naming SetupWithManager", err)
	}
	mgr := newTestManager(t, false)
	r := newTestRing(t, 0)
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := ControllerManagedBy(mgr).Named("found").For(&corev1.ConfigMap{}).Complete(noop); err != nil {
		t.Fatal(err)
	}
	if n := len(r.controllers); n != 1 {
		t.Fatalf("the ring has %d controllers, want the one built with ControllerManagedBy", n)
	}
}
