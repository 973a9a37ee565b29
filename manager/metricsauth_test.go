package manager

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeReviews answers TokenReviews (token "good-<user>" is user <user>) and
// SubjectAccessReviews (only users in allowed may get /metrics), counting
// the calls.
type fakeReviews struct {
	allowed          map[string]bool
	tokenReviews     int
	accessReviews    int
	lastAccessReview authorizationv1.SubjectAccessReviewSpec
}

func (f *fakeReviews) auth(clock *time.Time) *metricsAuth {
	a := newMetricsAuth(tokenReviewFunc(f.tokenReview), accessReviewFunc(f.accessReview), logr.Discard())
	a.now = func() time.Time { return *clock }
	return a
}

func (f *fakeReviews) tokenReview(tr *authenticationv1.TokenReview) *authenticationv1.TokenReview {
	f.tokenReviews++
	tr = tr.DeepCopy()
	if user, ok := strings.CutPrefix(tr.Spec.Token, "good-"); ok {
		tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: user, Groups: []string{"b", "a"}}}
	} else {
		tr.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
	}
	return tr
}

func (f *fakeReviews) accessReview(sar *authorizationv1.SubjectAccessReview) *authorizationv1.SubjectAccessReview {
	f.accessReviews++
	sar = sar.DeepCopy()
	f.lastAccessReview = sar.Spec
	na := sar.Spec.NonResourceAttributes
	sar.Status.Allowed = f.allowed[sar.Spec.User] && na != nil && na.Path == "/metrics" && na.Verb == "get"
	return sar
}

// tokenReviewFunc and accessReviewFunc answer reviews in memory.
type tokenReviewFunc func(*authenticationv1.TokenReview) *authenticationv1.TokenReview

func (f tokenReviewFunc) Create(_ context.Context, tr *authenticationv1.TokenReview, _ metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	return f(tr), nil
}

type accessReviewFunc func(*authorizationv1.SubjectAccessReview) *authorizationv1.SubjectAccessReview

func (f accessReviewFunc) Create(_ context.Context, sar *authorizationv1.SubjectAccessReview, _ metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error) {
	return f(sar), nil
}

func TestMetricsAuthStatusesAndCache(t *testing.T) {
	clock := time.Unix(1000, 0)
	f := &fakeReviews{allowed: map[string]bool{"prometheus": true}}
	a := f.auth(&clock)
	h := a.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("metrics")) }))
	do := func(method, auth string) int {
		req := httptest.NewRequest(method, "/metrics", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	for _, c := range []struct {
		name, method, auth string
		want               int
	}{
		{"no header", http.MethodGet, "", http.StatusUnauthorized},
		{"basic auth", http.MethodGet, "Basic Zm9vOmJhcg==", http.StatusUnauthorized},
		{"empty bearer", http.MethodGet, "Bearer ", http.StatusUnauthorized},
		{"bad token", http.MethodGet, "Bearer nope", http.StatusUnauthorized},
		{"no RBAC", http.MethodGet, "Bearer good-stranger", http.StatusForbidden},
		{"allowed", http.MethodGet, "Bearer good-prometheus", http.StatusOK},
		{"allowed, lower-case scheme", http.MethodGet, "bearer good-prometheus", http.StatusOK},
		{"POST", http.MethodPost, "Bearer good-prometheus", http.StatusMethodNotAllowed},
	} {
		if got := do(c.method, c.auth); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	if f.lastAccessReview.User != "prometheus" || len(f.lastAccessReview.Groups) != 2 {
		t.Errorf("SubjectAccessReview asked about %+v, want user prometheus with its groups", f.lastAccessReview)
	}
	// One review of each kind per distinct question so far: the second
	// allowed scrape was answered from the cache.
	if f.tokenReviews != 3 || f.accessReviews != 2 {
		t.Fatalf("%d TokenReviews and %d SubjectAccessReviews, want 3 (nope, stranger, prometheus) and 2 (stranger, prometheus)", f.tokenReviews, f.accessReviews)
	}

	// A refusal is forgotten after metricsDenyTTL, an allowed answer kept
	// until metricsAllowTTL: RBAC granted now reaches the stranger soon.
	f.allowed["stranger"] = true
	clock = clock.Add(metricsDenyTTL)
	if got := do(http.MethodGet, "Bearer good-stranger"); got != http.StatusOK {
		t.Errorf("stranger after RBAC was granted and the refusal expired: %d, want 200", got)
	}
	tr, ar := f.tokenReviews, f.accessReviews
	if got := do(http.MethodGet, "Bearer good-prometheus"); got != http.StatusOK || f.tokenReviews != tr || f.accessReviews != ar {
		t.Errorf("prometheus within metricsAllowTTL: %d with %d new reviews, want 200 from the cache", got, f.tokenReviews-tr+f.accessReviews-ar)
	}
	clock = clock.Add(metricsAllowTTL)
	f.allowed["prometheus"] = false
	if got := do(http.MethodGet, "Bearer good-prometheus"); got != http.StatusForbidden {
		t.Errorf("prometheus after its RBAC was withdrawn and the answer expired: %d, want 403", got)
	}
}

// A flood of distinct bad tokens does not grow the cache past its bound.
func TestMetricsAuthCacheIsBounded(t *testing.T) {
	clock := time.Unix(1000, 0)
	f := &fakeReviews{}
	a := f.auth(&clock)
	a.maxSize = 8
	for i := range 100 {
		if _, _, err := a.authenticate(t.Context(), "bad-"+string(rune('A'+i))); err != nil {
			t.Fatal(err)
		}
		if len(a.users) > a.maxSize {
			t.Fatalf("after %d tokens the cache holds %d, more than %d", i+1, len(a.users), a.maxSize)
		}
	}
}

// Given files, the server presents their certificate and picks up a
// rotated one at the next handshake; without them, a self-signed one.
func TestMetricsTLSCertificates(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writePair := func(at time.Time) *x509.Certificate {
		t.Helper()
		c, err := selfSignedCertificate(at)
		if err != nil {
			t.Fatal(err)
		}
		key, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600); err != nil {
			t.Fatal(err)
		}
		parsed, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return parsed
	}
	first := writePair(time.Now())
	cfg, err := metricsTLSConfig(certFile, keyFile, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	served := func() *x509.Certificate {
		t.Helper()
		c, err := cfg.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf
	}
	if got := served(); got.SerialNumber.Cmp(first.SerialNumber) != 0 {
		t.Fatalf("served serial %v, want the file's %v", got.SerialNumber, first.SerialNumber)
	}
	// A rotation: new contents and a later modification time.
	second := writePair(time.Now())
	later := time.Now().Add(time.Minute)
	for _, f := range []string{certFile, keyFile} {
		if err := os.Chtimes(f, later, later); err != nil {
			t.Fatal(err)
		}
	}
	if got := served(); got.SerialNumber.Cmp(second.SerialNumber) != 0 {
		t.Errorf("after rotation served serial %v, want the new file's %v", got.SerialNumber, second.SerialNumber)
	}
	// A half-written rotation keeps the previous pair.
	if err := os.WriteFile(keyFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := served(); got.SerialNumber.Cmp(second.SerialNumber) != 0 {
		t.Errorf("with a broken key file served serial %v, want the previous %v", got.SerialNumber, second.SerialNumber)
	}

	if _, err := metricsTLSConfig(filepath.Join(dir, "missing.crt"), keyFile, logr.Discard()); err == nil {
		t.Error("a missing certificate file was accepted")
	}
	self, err := metricsTLSConfig("", "", logr.Discard())
	if err != nil || len(self.Certificates) != 1 {
		t.Fatalf("self-signed: %v, %d certificates", err, len(self.Certificates))
	}
	leaf, err := x509.ParseCertificate(self.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := leaf.VerifyHostname("localhost"); err != nil {
		t.Errorf("self-signed certificate: %v", err)
	}
}

func TestMetricsCertOptionsValidated(t *testing.T) {
	for _, o := range []Options{
		{MetricsSecure: true, MetricsCertFile: "tls.crt"},
		{MetricsSecure: true, MetricsKeyFile: "tls.key"},
		{MetricsCertFile: "tls.crt", MetricsKeyFile: "tls.key"},
	} {
		o.Ring, o.Identity, o.LeaseNamespace = "r", "r-0", "default"
		o.applyDefaults()
		if err := o.validate(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}
