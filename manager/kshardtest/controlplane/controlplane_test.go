package controlplane

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kshard/kshard/internal/kittools"
	"github.com/kshard/kshard/internal/testkubectl"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func TestLeaseVisibleThroughKubectl(t *testing.T) {
	cp := ForTest(t, Options{})
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cp.Config())
	holder := "r-0"
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "kshard-smoke-r-0", Namespace: "default", Labels: map[string]string{"kshard.io/ring": "smoke"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}
	if _, err := cs.CoordinationV1().Leases("default").Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating lease: %v", err)
	}
	kubectl := testkubectl.Require(t)
	out, err := exec.Command(kubectl, "--kubeconfig", cp.KubeconfigPath(), "get", "leases", "-A", "-l", "kshard.io/ring=smoke").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get leases: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "kshard-smoke-r-0") || !strings.Contains(string(out), "r-0") {
		t.Fatalf("kubectl did not list the lease:\n%s", out)
	}
}

func TestRestrictedIdentityIsForbidden(t *testing.T) {
	cp := ForTest(t, Options{})
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cp.RestrictedConfig())
	_, err := cs.CoordinationV1().Leases("default").List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("restricted user listing leases: got %v, want Forbidden (RBAC must be on)", err)
	}
	// The same identity is authenticated: a self review names it.
	review, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: "list", Group: "coordination.k8s.io", Resource: "leases", Namespace: "default"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("self access review: %v", err)
	}
	if review.Status.Allowed {
		t.Fatalf("restricted user may list leases; want denied")
	}
}

func TestAPIServerRestartKeepsAddressAndData(t *testing.T) {
	cp := ForTest(t, Options{})
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cp.Config())
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &metaConfigMap, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	host := cp.Host()
	cp.StopAPIServer()
	if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, metaConfigMap.Name, metav1.GetOptions{}); err == nil {
		t.Fatal("API server answered while stopped")
	}
	start := time.Now()
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("API server restarted in %s", time.Since(start).Round(time.Millisecond))
	if cp.Host() != host {
		t.Fatalf("restart moved the API server from %s to %s", host, cp.Host())
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, metaConfigMap.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("object lost across restart: %v", err)
	}
}

func TestPortPickerAvoidsEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	if low <= lowestPort {
		t.Skipf("ephemeral range starts at %d: no room below it, freePorts falls back to port 0", low)
	}
	ports, err := freePorts(20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p < lowestPort || p >= low || seen[p] {
			t.Errorf("port %d: want distinct ports in [%d, %d)", p, lowestPort, low)
		}
		seen[p] = true
	}
}

func TestPortClashIsRetried(t *testing.T) {
	SkipIfShort(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy := taken.Addr().(*net.TCPAddr).Port
	calls := 0
	pickPorts = func(n int) ([]int, error) {
		calls++
		ports, err := freePorts(n)
		if calls == 1 {
			ports[0] = busy // etcd's client port: already bound
		}
		return ports, err
	}
	t.Cleanup(func() { pickPorts = freePorts })
	cp := ForTest(t, Options{})
	if calls < 3 { // etcd twice (clash, retry) + API server
		t.Fatalf("expected a retry after the clash, ports were picked %d times", calls)
	}
	if strings.Contains(cp.etcdURL, ":"+strconv.Itoa(busy)) {
		t.Fatalf("etcd claims the busy port %d", busy)
	}
}

func TestFailedStartReportsLogLines(t *testing.T) {
	SkipIfShort(t)
	ctx := context.Background()
	bins, err := kittools.Ensure(ctx, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Start(ctx, Options{BinDir: bins.Dir(), ExtraAPIServerArgs: []string{"--no-such-flag=1"}, StartTimeout: 20 * time.Second})
	if err == nil {
		t.Fatal("start with a bogus API server flag succeeded")
	}
	if !strings.Contains(err.Error(), "no-such-flag") || !strings.Contains(err.Error(), "kube-apiserver") {
		t.Fatalf("error does not show the API server's log: %v", err)
	}
	// The kept directory is named, and nothing is left listening.
	i := strings.Index(err.Error(), "control-plane files kept in ")
	if i < 0 {
		t.Fatalf("error does not name the kept files: %v", err)
	}
	dir := strings.TrimSuffix(strings.TrimSpace(err.Error()[i+len("control-plane files kept in "):]), ")")
	if _, statErr := os.Stat(filepath.Join(dir, "kube-apiserver.log")); statErr != nil {
		t.Fatalf("log not kept: %v", statErr)
	}
	os.RemoveAll(dir)
}

// A BinDir without the binaries is refused, naming the option and the
// missing binary, before anything starts or is built.
func TestBinDirWithoutBinariesIsNamed(t *testing.T) {
	dir := t.TempDir()
	cp, err := Start(t.Context(), Options{BinDir: dir, Dir: filepath.Join(dir, "files")})
	if err == nil {
		_ = cp.Stop()
		t.Fatal("started without binaries")
	}
	for _, want := range []string{"Options.BinDir " + dir, "kube-apiserver"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if _, statErr := os.Stat(filepath.Join(dir, "files")); !os.IsNotExist(statErr) {
		t.Errorf("Start made its directory before finding the binaries: %v", statErr)
	}
}
