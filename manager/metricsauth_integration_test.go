package manager

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kshard/kshard/internal/testwait"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// With MetricsSecure, /metrics is HTTPS and served only to a caller whose
// service account token the API server authenticates and whose RBAC grants
// get on the non-resource URL /metrics: no token is 401, a service account
// without that grant 403, one bound to such a ClusterRole 200.
func TestSecureMetricsAskTheAPIServer(t *testing.T) {
	ctx := context.Background()
	ns := "it-secure-metrics"
	cfg, cs := newTestRing(t, ns)
	r := startReplica(t, cfg, ns, "r-0", &journal{}, time.Millisecond, func(o *Options) { o.MetricsSecure = true })

	for _, sa := range []string{"scraper", "stranger"} {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "it-secure-metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "it-secure-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: ns}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	scraper, stranger := saToken(t, cs, ns, "scraper"), saToken(t, cs, ns, "stranger")

	testwait.For(t, 30*time.Second, "the metrics server to be bound", func() (bool, string) { return r.mgr.MetricsAddr() != "", "" })
	url := "https://" + r.mgr.MetricsAddr() + "/metrics"
	// The certificate is self-signed (no MetricsCertFile): not verified here,
	// as a scraper of such an endpoint would not.
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	scrape := func(token string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		if resp.TLS == nil {
			t.Fatalf("GET %s was not served over TLS", url)
		}
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	if code, body := scrape(""); code != http.StatusUnauthorized {
		t.Errorf("without a token: %d %q, want 401", code, body)
	}
	if code, body := scrape("not-a-token"); code != http.StatusUnauthorized {
		t.Errorf("with a bogus token: %d %q, want 401", code, body)
	}
	if code, body := scrape(stranger); code != http.StatusForbidden || !strings.Contains(body, "system:serviceaccount:"+ns+":stranger") {
		t.Errorf("as a service account without RBAC: %d %q, want 403 naming the user", code, body)
	}
	code, body := scrape(scraper)
	if code != http.StatusOK || !strings.Contains(body, "kshard_") {
		t.Errorf("as a service account allowed get on /metrics: %d %.200q, want 200 with kshard_ metrics", code, body)
	}
	// Plain HTTP on the TLS port is not served.
	if code, _ := get("http://" + r.mgr.MetricsAddr() + "/metrics"); code == http.StatusOK {
		t.Errorf("plain HTTP on the secure port: %d, want a refusal", code)
	}
}

// saToken mints a token of service account name through the TokenRequest
// API, as the kubelet does for a pod's projected token.
func saToken(t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	expiry := int64(600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}
