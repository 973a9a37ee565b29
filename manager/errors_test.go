package manager

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// layers are the prefixes kshard's packages put on their own errors.
var layers = []string{"manager", "lease", "cache", "controller", "handoff", "shard"}

// repeatedLayer returns a layer whose prefix ("lease: ") appears more than
// once in msg, or "".
func repeatedLayer(msg string) string {
	for _, l := range layers {
		if strings.Count(msg, l+": ") > 1 {
			return l
		}
	}
	return ""
}

func TestRepeatedLayer(t *testing.T) {
	for msg, want := range map[string]string{
		"manager: lease: forbidden to get leases": "",
		"lease: lease: forbidden to get leases":   "lease",
		"manager: invalid options: a\nmanager: b": "manager",
	} {
		if got := repeatedLayer(msg); got != want {
			t.Errorf("repeatedLayer(%q) = %q, want %q", msg, got, want)
		}
	}
}

// TestStartErrorNamesEachLayerOnce: a fatal error of the lease member (RBAC
// refuses every Lease request) reaches Start's caller as "manager: lease:
// forbidden …", each layer named once, and an invalid configuration as one
// "manager: invalid options:" however many options are wrong.
func TestStartErrorNamesEachLayerOnce(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/version" {
			_, _ = io.WriteString(w, `{"major":"1","minor":"36","gitVersion":"v1.36.3"}`)
			return
		}
		w.WriteHeader(http.StatusForbidden)
		_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,`+
			`"message":"leases.coordination.k8s.io is forbidden: User \"system:serviceaccount:ops:op\" cannot %s resource \"leases\""}`, strings.ToLower(r.Method))
	}))
	defer srv.Close()
	m, err := New(&rest.Config{Host: srv.URL}, Options{
		Ring: "ring", LeaseNamespace: "ops", Identity: "r-0", Logger: testLogger(t, "r-0"),
		MetricsBindAddress: "0", HealthProbeBindAddress: "0", GracefulShutdownTimeout: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = m.Start(ctx)
	if err == nil || !strings.HasPrefix(err.Error(), "manager: lease: forbidden to ") {
		t.Fatalf("Start: %v; want an error starting %q", err, "manager: lease: forbidden to ")
	}
	if l := repeatedLayer(err.Error()); l != "" {
		t.Errorf("Start's error repeats the prefix %q: %v", l+":", err)
	}

	_, err = New(&rest.Config{Host: srv.URL}, Options{Ring: "Bad_Ring", Identity: "Bad_Id", LeaseNamespace: "Bad_NS", Burst: -1})
	if err == nil || !strings.HasPrefix(err.Error(), "manager: invalid options: ") {
		t.Fatalf("New: %v; want an error starting %q", err, "manager: invalid options: ")
	}
	if l := repeatedLayer(err.Error()); l != "" {
		t.Errorf("New's error repeats the prefix %q: %v", l+":", err)
	}
}
