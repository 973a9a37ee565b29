package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kshard/kshard/shard"
)

// seen is what a recording API server saw of a request.
type seen struct{ path, auth, impersonated string }

// recorder keeps the last request a recording API server saw.
type recorder struct {
	mu   sync.Mutex
	last seen
}

// recordingAPI serves an active one-member ring in every namespace and
// records the path and the headers of the last request.
func recordingAPI(t *testing.T) (string, *recorder) {
	t.Helper()
	s := &recorder{}
	// TLS: client-go sends credentials to an https server only.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.last = seen{r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Impersonate-User")}
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		l := member("a", "active", shard.FullPartitionSet(271))
		json.NewEncoder(w).Encode(coordinationv1.LeaseList{TypeMeta: metav1.TypeMeta{Kind: "LeaseList", APIVersion: "coordination.k8s.io/v1"},
			Items: []coordinationv1.Lease{l}})
	}))
	t.Cleanup(srv.Close)
	return srv.URL, s
}

func (s *recorder) get() seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

func TestKubectlConnectionFlags(t *testing.T) {
	url, got := recordingAPI(t)
	// The kubeconfig points nowhere (port 1) with token t: the flags must
	// override both, as in kubectl.
	nowhere := writeKubeconfig(t, "https://127.0.0.1:1")
	tests := []struct {
		name string
		args []string
		want seen
	}{
		{"server, token and namespace after the command",
			[]string{"status", "--kubeconfig", nowhere, "--server", url, "--insecure-skip-tls-verify", "--token", "s3cret", "-n", "ops"},
			seen{path: "/apis/coordination.k8s.io/v1/namespaces/ops/leases", auth: "Bearer s3cret"}},
		{"before the command",
			[]string{"--kubeconfig", nowhere, "--server=" + url, "--insecure-skip-tls-verify", "--namespace=ops", "--token=b4", "status"},
			seen{path: "/apis/coordination.k8s.io/v1/namespaces/ops/leases", auth: "Bearer b4"}},
		{"impersonation, namespace from the context",
			[]string{"status", "--kubeconfig", nowhere, "--server", url, "--insecure-skip-tls-verify", "--as", "jane"},
			seen{path: "/apis/coordination.k8s.io/v1/namespaces/from-context/leases", auth: "Bearer t", impersonated: "jane"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit code %d, stderr %q", code, stderr)
			}
			if !strings.Contains(stdout, "RING ops") {
				t.Errorf("stdout %q shows no ring", stdout)
			}
			if g := got.get(); g != tc.want {
				t.Errorf("the API server saw %+v, want %+v", g, tc.want)
			}
		})
	}
}

func TestKubectlContextFlag(t *testing.T) {
	url, got := recordingAPI(t)
	kc := writeKubeconfig(t, url)
	// An unknown context is an error naming it, as before.
	code, _, stderr := run(t, "status", "--kubeconfig", kc, "--context", "missing")
	if code != 1 || !strings.Contains(stderr, "missing") {
		t.Errorf("unknown context: code %d, stderr %q", code, stderr)
	}
	// The kubeconfig's own context "c", named explicitly, works.
	if code, _, stderr := run(t, "status", "--kubeconfig", kc, "--context", "c", "--insecure-skip-tls-verify"); code != 0 {
		t.Errorf("--context c: code %d, stderr %q", code, stderr)
	}
	if g := got.get(); g.path != "/apis/coordination.k8s.io/v1/namespaces/from-context/leases" {
		t.Errorf("path %q", g.path)
	}
}

func TestKubectlFlagsDoNotApplyToDemo(t *testing.T) {
	for _, args := range [][]string{
		{"--token", "x", "demo"},
		{"--as", "jane", "version"},
	} {
		code, _, stderr := run(t, args...)
		if code != 2 {
			t.Errorf("%v: exit code %d, want 2", args, code)
		}
		flag := strings.TrimPrefix(args[0], "--")
		oneLineErr(t, stderr, "flag --"+flag+" does not apply to "+args[2])
	}
	// After the command they are simply unknown to it.
	code, _, stderr := run(t, "demo", "--token", "x")
	if code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	oneLineErr(t, stderr, "unknown flag --token")
}

func TestHelpListsKubectlFlags(t *testing.T) {
	code, stdout, _ := run(t, "status", "--help")
	if code != 0 {
		t.Fatalf("exit code %d", code)
	}
	for _, f := range []string{"--kubeconfig", "--context", "-n, --namespace", "--server", "--token", "--as", "--request-timeout"} {
		if !strings.Contains(stdout, f) {
			t.Errorf("status --help does not mention %s", f)
		}
	}
}
