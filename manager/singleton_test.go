package manager

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/internal/testwait"
	"github.com/kshard/kshard/shard"
)

// TestSingletonWritesRefusedOnceValidityPasses: a singleton's context carries
// the lease validity as a reconcile's does, so the manager's clients refuse
// its writes once the validity has passed or a fence has ended its epoch,
// although the singleton has not been revoked (its context is not done): a
// process resumed after a pause writes before the coordinator runs.
func TestSingletonWritesRefusedOnceValidityPasses(t *testing.T) {
	var mu sync.Mutex // guards seen, appended to by the server's goroutines
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"y","namespace":"x"}}`)
	}))
	defer srv.Close()
	m, err := New(&rest.Config{Host: srv.URL}, Options{Ring: "ring", Namespace: "default", Identity: "r-0"})
	if err != nil {
		t.Fatal(err)
	}
	ctxs := make(chan context.Context, 1)
	err = m.AddSingleton("s", RunnableFunc(func(ctx context.Context) error {
		ctxs <- ctx
		<-ctx.Done()
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	s := m.runnables[len(m.runnables)-1].(*singleton)
	// The coordinator's published validity, controlled by the test.
	var current atomic.Pointer[shard.Validity]
	setValidity := func(v shard.Validity) { current.Store(&v) }
	setValidity(shard.Validity{Until: time.Now().Add(time.Hour), Epoch: 1})
	s.validity = func() shard.Validity { return *current.Load() }

	base, stop := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { started <- s.Start(base) }()
	defer func() {
		stop()
		if err := <-started; err != nil {
			t.Errorf("singleton Start: %v", err)
		}
	}()
	// Admit is ignored until Start has recorded its base context.
	testwait.True(t, 10*time.Second, "the singleton's Start to record its context", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.base != nil
	})
	if err := s.Admit(context.Background(), shard.NewPartitionSet(m.partitioner.Count(), s.partition)); err != nil {
		t.Fatal(err)
	}
	var ctx context.Context
	select {
	case ctx = <-ctxs:
	case <-time.After(10 * time.Second):
		t.Fatal("the singleton did not start on activation")
	}

	cms := m.GetClient().CoreV1().ConfigMaps("x")
	patch := func() error {
		_, err := cms.Patch(ctx, "y", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
		return err
	}
	if err := patch(); err != nil {
		t.Fatalf("patch within the validity: %v", err)
	}
	// The validity passes (renewals stopped, or the process was paused):
	// nothing has revoked the singleton yet.
	setValidity(shard.Validity{Until: time.Now().Add(-time.Millisecond), Epoch: 1})
	if ctx.Err() != nil {
		t.Fatal("the singleton's context ended; the test would not show the transport's check")
	}
	if err := patch(); !errors.Is(err, controller.ErrLeaseExpired) {
		t.Fatalf("patch after the validity passed: error %v, want controller.ErrLeaseExpired", err)
	}
	// A fence, then a timely renewal: valid again, but in a new epoch; the
	// singleton started in the old one must not write until it is revoked
	// and activated again.
	setValidity(shard.Validity{Until: time.Now().Add(time.Hour), Epoch: 2})
	if err := patch(); !errors.Is(err, controller.ErrLeaseExpired) {
		t.Fatalf("patch after a fence ended the singleton's epoch: error %v, want controller.ErrLeaseExpired", err)
	}
	mu.Lock()
	got := strings.Join(seen, ",")
	mu.Unlock()
	if got != "PATCH" {
		t.Fatalf("the server saw %q, want one PATCH (the late ones never sent)", got)
	}

	if err := s.Revoke(context.Background(), shard.NewPartitionSet(m.partitioner.Count(), s.partition), false); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() == nil {
		t.Fatal("revoke did not cancel the singleton's context")
	}
}
