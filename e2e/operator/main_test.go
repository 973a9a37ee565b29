package operator_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"github.com/kshard/kshard/cmd/example-operator/api/v1alpha1"
	"github.com/kshard/kshard/internal/process"
	"github.com/kshard/kshard/internal/testwait"
)

// operatorBin is the example-operator binary TestMain builds once.
var operatorBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// Every test here runs the built binary: none is a unit test.
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "kshard-operator-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	operatorBin = filepath.Join(dir, "example-operator")
	out, err := exec.Command("go", "build", "-o", operatorBin, "github.com/kshard/kshard/cmd/example-operator").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building example-operator: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// skipIfShort skips a test of the built binary under -short, which means
// unit tests only; TestMain builds nothing then.
func skipIfShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e: runs the example-operator binary; skipped with -short")
	}
}

var (
	crdGVR    = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	widgetGVR = v1alpha1.GroupVersion.WithResource("widgets")
)

// installCRD creates the Widget CRD from the binary's embedded copy (equal
// to deploy/crd.yaml) and waits until Widgets can be listed.
func installCRD(t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	crd := &unstructured.Unstructured{}
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(v1alpha1.CRD), 4096).Decode(&crd.Object); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	awaitWidgetsServed(t, dyn)
}

// awaitWidgetsServed waits until the API server serves Widgets: Established
// alone does not mean a list works yet.
func awaitWidgetsServed(t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	testwait.NoError(t, 200*time.Millisecond, 2*time.Minute, "Widget CRD served", func() error {
		_, err := dyn.Resource(widgetGVR).List(context.Background(), metav1.ListOptions{Limit: 1})
		return err
	})
}

// operator is one example-operator process, run by the process runner.
type operator struct {
	identity string
	proc     *process.Process
}

// startOperator runs the binary with args and extra environment. The test's
// cleanup kills it if it still runs and waits for it, and prints its last log
// lines if the test failed.
func startOperator(t *testing.T, identity string, env []string, args ...string) *operator {
	t.Helper()
	p, err := process.Start(process.Options{Name: identity, Path: operatorBin, Args: args, Env: env,
		LogPath: filepath.Join(t.TempDir(), identity+".log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("last log lines of %s (%s):\n%s", identity, p.LogPath(), p.Tail(20))
		}
	})
	return &operator{identity: identity, proc: p}
}

// stop sends SIGTERM, as the kubelet does, and returns the exit code once the
// process exits; after timeout it kills the process and fails the test.
func (o *operator) stop(t *testing.T, timeout time.Duration) int {
	t.Helper()
	exit, err := o.proc.Stop(timeout)
	if err != nil {
		t.Fatal(err)
	}
	return exit.Code
}

// serverAddr waits for the address the replica's server (metrics or health
// probe) bound, from its "serving" log line.
func (o *operator) serverAddr(t *testing.T, server string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr, err := o.proc.ServingAddr(ctx, server)
	if err != nil {
		t.Error(err)
	}
	return addr
}

// reconcileTotals scrapes controller_runtime_reconcile_total of the widget
// controller from the metrics server at addr, summed over results, and the
// error count.
func reconcileTotals(addr string) (total, errs int, err error) {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "controller_runtime_reconcile_total{") || !strings.Contains(line, `controller="widget"`) {
			continue
		}
		fields := strings.Fields(line)
		v, perr := strconv.ParseFloat(fields[len(fields)-1], 64)
		if perr != nil {
			return 0, 0, fmt.Errorf("metrics line %q: %w", line, perr)
		}
		total += int(v)
		if strings.Contains(line, `result="error"`) {
			errs += int(v)
		}
	}
	return total, errs, nil
}
