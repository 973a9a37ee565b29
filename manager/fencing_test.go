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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/kshard/kshard/controller"
)

// validFor returns a context whose writes are valid until until, in an
// epoch no fence ends.
func validFor(until time.Time) context.Context {
	return controller.WithLeaseValidity(context.Background(), func() controller.Validity {
		return controller.Validity{Until: until, Epoch: 1}
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
