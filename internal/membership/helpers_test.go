package membership

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/internal/testwait"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/shard"
)

var leasesGVR = coordinationv1.SchemeGroupVersion.WithResource("leases")

// fakeAPI is the client-go fake clientset made strict about Leases where
// this package depends on it: it assigns resourceVersions and UIDs, refuses
// stale updates with Conflict and honours delete preconditions, as the API
// server does. hook, when set, runs first on every Lease request and may
// fail it or act (e.g. move a fake clock) while it is in flight.
type fakeAPI struct {
	*fake.Clientset

	mu     sync.Mutex
	rv     int
	uid    int
	hook   func(verb, name string, obj *coordinationv1.Lease) error
	writes map[string]int // successful creates and updates, by Lease name
}

func newFakeAPI() *fakeAPI {
	f := &fakeAPI{Clientset: fake.NewClientset(), rv: 1000, writes: map[string]int{}}
	tracker := f.Tracker()
	gr := leasesGVR.GroupResource()

	f.PrependReactor("create", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		obj := a.(clienttesting.CreateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		f.mu.Lock()
		defer f.mu.Unlock()
		if obj.ResourceVersion != "" {
			return true, nil, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
		}
		f.rv++
		f.uid++
		obj.ResourceVersion = strconv.Itoa(f.rv)
		obj.UID = types.UID(fmt.Sprintf("uid-%d", f.uid))
		if err := tracker.Create(leasesGVR, obj, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		f.writes[obj.Name]++
		return true, obj.DeepCopy(), nil
	})
	f.PrependReactor("update", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		obj := a.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		f.mu.Lock()
		defer f.mu.Unlock()
		cur, err := tracker.Get(leasesGVR, a.GetNamespace(), obj.Name)
		if err != nil {
			return true, nil, err
		}
		if obj.ResourceVersion != "" && obj.ResourceVersion != cur.(*coordinationv1.Lease).ResourceVersion {
			return true, nil, apierrors.NewConflict(gr, obj.Name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
		}
		f.rv++
		obj.ResourceVersion = strconv.Itoa(f.rv)
		obj.UID = cur.(*coordinationv1.Lease).UID
		if err := tracker.Update(leasesGVR, obj, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		f.writes[obj.Name]++
		return true, obj.DeepCopy(), nil
	})
	f.PrependReactor("delete", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		d := a.(clienttesting.DeleteAction)
		f.mu.Lock()
		defer f.mu.Unlock()
		cur, err := tracker.Get(leasesGVR, a.GetNamespace(), d.GetName())
		if err != nil {
			return true, nil, err
		}
		l := cur.(*coordinationv1.Lease)
		if p := d.GetDeleteOptions().Preconditions; p != nil {
			if p.UID != nil && *p.UID != l.UID || p.ResourceVersion != nil && *p.ResourceVersion != l.ResourceVersion {
				return true, nil, apierrors.NewConflict(gr, l.Name, errors.New("precondition failed"))
			}
		}
		return true, nil, tracker.Delete(leasesGVR, a.GetNamespace(), d.GetName())
	})
	// Prepended last, so that it runs first.
	f.PrependReactor("*", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		f.mu.Lock()
		hook := f.hook
		f.mu.Unlock()
		if hook == nil {
			return false, nil, nil
		}
		name := ""
		var obj *coordinationv1.Lease
		switch a := a.(type) {
		case clienttesting.GetAction:
			name = a.GetName()
		case clienttesting.DeleteAction:
			name = a.GetName()
		case clienttesting.CreateAction:
			obj = a.GetObject().(*coordinationv1.Lease)
			name = obj.Name
		case clienttesting.UpdateAction:
			obj = a.GetObject().(*coordinationv1.Lease)
			name = obj.Name
		}
		if err := hook(a.GetVerb(), name, obj); err != nil {
			return true, nil, err
		}
		return false, nil, nil
	})
	return f
}

func (f *fakeAPI) setHook(h func(verb, name string, obj *coordinationv1.Lease) error) {
	f.mu.Lock()
	f.hook = h
	f.mu.Unlock()
}

func (f *fakeAPI) writesOf(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writes[name]
}

// waitTimeout is how long a test waits for a state: generous, as the
// machine is shared.
const waitTimeout = 20 * time.Second

// step moves clk by d once some goroutine waits on it, so that a timer is
// never created after the step it was meant to observe.
func step(t testing.TB, clk *clocktesting.FakeClock, d time.Duration) {
	t.Helper()
	testwait.True(t, waitTimeout, "a goroutine waiting on the fake clock", clk.HasWaiters)
	clk.Step(d)
}

// logSink captures log lines and forwards them to the test log.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func newTestLogger(t testing.TB) (logr.Logger, *logSink) {
	s := &logSink{}
	var done sync.Once
	finished := make(chan struct{})
	t.Cleanup(func() { done.Do(func() { close(finished) }) })
	return funcr.New(func(prefix, args string) {
		line := strings.TrimSpace(prefix + " " + args)
		s.mu.Lock()
		s.lines = append(s.lines, line)
		s.mu.Unlock()
		select {
		case <-finished: // t.Log after the test ended would panic
		default:
			t.Log(line)
		}
	}, funcr.Options{Verbosity: 1}), s
}

func (s *logSink) count(substr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.lines {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

// countAll counts the lines holding every one of substrs.
func (s *logSink) countAll(substrs ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.lines {
		all := true
		for _, sub := range substrs {
			all = all && strings.Contains(l, sub)
		}
		if all {
			n++
		}
	}
	return n
}

// running is a Member under Run in the background.
type running struct {
	*Member
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func run(t testing.TB, m *Member) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Member: m, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = m.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// stop cancels Run and returns its result.
func (r *running) stop() error {
	r.cancel()
	<-r.done
	return r.err
}

// wait returns Run's result once it ended on its own.
func (r *running) wait(t testing.TB) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(20 * time.Second):
		t.Fatal("timed out waiting for Run to return")
		return nil
	}
}

func (r *running) returned() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// counterValue reads a counter of reg by name and label values.
func counterValue(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			for k, v := range labels {
				if !hasLabel(m, k, v) {
					continue metric
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func hasLabel(m *dto.Metric, k, v string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == k && l.GetValue() == v {
			return true
		}
	}
	return false
}

// peerLease is a well-formed member Lease of another process.
func peerLease(ns, ring, identity, incarnation string, mutate ...func(*coordinationv1.Lease)) *coordinationv1.Lease {
	holder := identity
	secs := int32(10)
	now := metav1.NewMicroTime(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name: lease.LeaseName(ring, identity), Namespace: ns,
			Labels: map[string]string{lease.LabelRing: ring, LabelState: string(handoff.StateActive), LabelPartitions: "0"},
			Annotations: map[string]string{
				AnnotationIncarnation: incarnation, AnnotationGeneration: "0", AnnotationParams: "",
				AnnotationClaim: EncodeClaim(shard.NewPartitionSet(7)),
			},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &now, AcquireTime: &now},
	}
	for _, f := range mutate {
		f(l)
	}
	return l
}

func observedByName(snap []Observed, name string) (Observed, bool) {
	for _, o := range snap {
		if o.Name == name {
			return o, true
		}
	}
	return Observed{}, false
}
