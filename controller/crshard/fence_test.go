package crshard

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	kcontroller "github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/shard"
)

// TestOwnClientsAreNotFenced: New puts the fencing transport on the
// manager's config, so once the ring's validity has passed a write of user
// code without a reconcile context is refused, while the ring's own
// clients (its Lease and pod client, the sharded cache's label patches),
// built from the config New was given before, still reach the API server.
func TestOwnClientsAreNotFenced(t *testing.T) {
	var mu sync.Mutex // guards seen, appended to by the server's goroutines
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	r, err := New(cfg, Options{Ring: "test", Namespace: "x", Identity: "r-0", Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	r.validity = func() shard.Validity { return shard.Validity{Until: time.Now().Add(-time.Millisecond)} }
	own, err := kubernetes.NewForConfig(r.own)
	if err != nil {
		t.Fatal(err)
	}
	labels, err := metadata.NewForConfig(r.labelConfig())
	if err != nil {
		t.Fatal(err)
	}
	user, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background() // no reconcile: only the replica's validity applies
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "test-r-0", Namespace: "x"}}
	_, _ = own.CoordinationV1().Leases("x").Update(ctx, lease, metav1.UpdateOptions{})
	_, _ = labels.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace("x").Patch(ctx, "y", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
	_, err = user.CoreV1().ConfigMaps("x").Patch(ctx, "y", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
	if !errors.Is(err, kcontroller.ErrLeaseExpired) {
		t.Fatalf("user write after the validity passed: error %v, want controller.ErrLeaseExpired", err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := "PUT /apis/coordination.k8s.io/v1/namespaces/x/leases/test-r-0,PATCH /api/v1/namespaces/x/configmaps/y"
	if got := strings.Join(seen, ","); got != want {
		t.Fatalf("the server saw %s, want kshard's own requests and not the user's write: %s", got, want)
	}
}
