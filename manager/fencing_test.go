package manager

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

	authzv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/shard"
	"github.com/kshard/kshard/shard/fence"
)

// validFor returns a context whose writes are valid until until, in an
// epoch no fence ends.
func validFor(until time.Time) context.Context {
	return controller.WithLeaseValidity(context.Background(), func() shard.Validity {
		return shard.Validity{Until: until, Epoch: 1}
	})
}

// TestManagerClientsRefuseLateWrites wires the pieces: a client built from
// the manager's config refuses a write of a reconcile whose validity passed
// (the server never sees it) and sends its reads and other writes.
func TestManagerClientsRefuseLateWrites(t *testing.T) {
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
	m, err := New(&rest.Config{Host: srv.URL}, Options{Ring: "ring", LeaseNamespace: "default", Identity: "r-0"})
	if err != nil {
		t.Fatal(err)
	}
	if v := m.GetControllerOptions().LeaseValidity; v == nil || !v().Until.IsZero() {
		t.Fatal("controllers of a manager must get a LeaseValidity, zero before the first renewal")
	}
	cms := m.GetClient().CoreV1().ConfigMaps("x")
	expired := validFor(time.Now().Add(-time.Millisecond))
	_, err = cms.Patch(expired, "y", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
	if !errors.Is(err, controller.ErrLeaseExpired) {
		t.Fatalf("late patch: error %v, want controller.ErrLeaseExpired", err)
	}
	if _, err := cms.Get(expired, "y", metav1.GetOptions{}); err != nil {
		t.Fatalf("read under an expired validity: %v", err)
	}
	valid := validFor(time.Now().Add(time.Hour))
	if _, err := cms.Patch(valid, "y", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch within the validity: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(seen, ","); got != "GET,PATCH" {
		t.Fatalf("the server saw %s, want GET,PATCH (the late patch never sent)", got)
	}
}

// TestOwnClientsAreNotFenced: once the replica's validity has passed, a
// write of user code without a reconcile context is refused, while
// kshard's own clients (built from the configs New builds its Lease, pod,
// cache and label clients from) still reach the API server: a replica
// must be able to renew to become valid again.
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
	lapsed := func() shard.Validity { return shard.Validity{Until: time.Now().Add(-time.Millisecond)} }
	opts := Options{QPS: 7, Burst: 9}
	cfgs := clientConfigs(&rest.Config{Host: srv.URL}, opts, fence.Transport(lapsed, nil))
	own, err := kubernetes.NewForConfig(protobuf(cfgs.own))
	if err != nil {
		t.Fatal(err)
	}
	user, err := kubernetes.NewForConfig(protobuf(cfgs.user))
	if err != nil {
		t.Fatal(err)
	}
	labels, err := metadata.NewForConfig(cfgs.labels)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background() // no reconcile: only the replica's validity applies
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "ring-r-0", Namespace: "x"}}
	_, _ = own.CoordinationV1().Leases("x").Update(ctx, lease, metav1.UpdateOptions{})
	_, _ = own.CoreV1().Pods("x").Get(ctx, "r-0", metav1.GetOptions{})
	_, _ = own.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{}, metav1.CreateOptions{})
	_, _ = labels.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace("x").Patch(ctx, "y", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
	_, err = user.CoreV1().ConfigMaps("x").Patch(ctx, "y", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
	if !errors.Is(err, controller.ErrLeaseExpired) {
		t.Fatalf("user write after the validity passed: error %v, want controller.ErrLeaseExpired", err)
	}
	t.Logf("user write: %v", err)
	mu.Lock()
	defer mu.Unlock()
	want := "PUT /apis/coordination.k8s.io/v1/namespaces/x/leases/ring-r-0," +
		"GET /api/v1/namespaces/x/pods/r-0," +
		"POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews," +
		"PATCH /api/v1/namespaces/x/configmaps/y"
	if got := strings.Join(seen, ","); got != want {
		t.Fatalf("the server saw\n%s\nwant kshard's own requests and not the user's write:\n%s", got, want)
	}
	for name, c := range map[string]*rest.Config{"user": cfgs.user, "own": cfgs.own} {
		if c.QPS != opts.QPS || c.Burst != opts.Burst {
			t.Errorf("%s config: QPS %v burst %d, want the options' %v and %d", name, c.QPS, c.Burst, opts.QPS, opts.Burst)
		}
	}
	if cfgs.labels.QPS >= 0 {
		t.Errorf("label config: QPS %v, want no client-side limit (the labeller bounds its rate)", cfgs.labels.QPS)
	}
}
