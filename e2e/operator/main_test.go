package operator_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"github.com/kshard/kshard/cmd/example-operator/api/v1alpha1"
	"github.com/kshard/kshard/cmd/example-operator/app"
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

// await polls cond until it returns nil, failing the test with cond's last
// error after timeout. Timeouts are generous: the machine is shared.
func await(t *testing.T, timeout, interval time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %s: %v", what, timeout, err)
		}
		time.Sleep(interval) // polling interval, not synchronisation: cond decides
	}
}

// installCRD creates the Widget CRD from the binary's embedded copy (equal
// to deploy/crd.yaml) and waits until Widgets can be listed.
func installCRD(t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	crd := &unstructured.Unstructured{}
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(app.WidgetCRD), 4096).Decode(&crd.Object); err != nil {
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
	await(t, 2*time.Minute, 200*time.Millisecond, "Widget CRD served", func() error {
		_, err := dyn.Resource(widgetGVR).List(context.Background(), metav1.ListOptions{Limit: 1})
		return err
	})
}

// operator is one example-operator process, in its own process group, with
// its stdout and stderr in a log file.
type operator struct {
	identity string
	logPath  string
	cmd      *exec.Cmd
	exited   chan struct{} // closed once cmd.Wait returned and waitErr is set
	waitErr  error
}

// startOperator runs the binary with args and extra environment. The test's
// cleanup kills it if it still runs and waits for it, and prints its last log
// lines if the test failed.
func startOperator(t *testing.T, identity string, env []string, args ...string) *operator {
	t.Helper()
	o := &operator{identity: identity, logPath: filepath.Join(t.TempDir(), identity+".log"), exited: make(chan struct{})}
	logFile, err := os.Create(o.logPath)
	if err != nil {
		t.Fatal(err)
	}
	o.cmd = exec.Command(operatorBin, args...)
	o.cmd.Env = append(os.Environ(), env...)
	o.cmd.Stdout, o.cmd.Stderr = logFile, logFile
	// Pdeathsig: a crashed test binary takes its replicas with it.
	o.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := o.cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("starting %s: %v", identity, err)
	}
	go func() { // owned by o: every path below waits for exited
		o.waitErr = o.cmd.Wait()
		logFile.Close()
		close(o.exited)
	}()
	t.Cleanup(func() {
		o.kill()
		if t.Failed() {
			t.Logf("last log lines of %s (%s):\n%s", identity, o.logPath, o.logTail(20))
		}
	})
	return o
}

func (o *operator) running() bool {
	select {
	case <-o.exited:
		return false
	default:
		return true
	}
}

// kill ends the process group at once and waits for the process.
func (o *operator) kill() {
	if o.running() {
		_ = syscall.Kill(-o.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-o.exited
}

// stop sends SIGTERM, as the kubelet does, and returns the exit code once the
// process exits; after timeout it kills the process and fails the test.
func (o *operator) stop(t *testing.T, timeout time.Duration) int {
	t.Helper()
	if o.running() {
		_ = syscall.Kill(o.cmd.Process.Pid, syscall.SIGTERM)
	}
	select {
	case <-o.exited:
	case <-time.After(timeout):
		o.kill()
		t.Fatalf("%s did not exit within %s of SIGTERM", o.identity, timeout)
	}
	return o.exitCode()
}

func (o *operator) exitCode() int {
	var ee *exec.ExitError
	switch {
	case o.waitErr == nil:
		return 0
	case errors.As(o.waitErr, &ee):
		return ee.ExitCode() // -1 when killed by a signal
	default:
		return -1
	}
}

func (o *operator) logTail(n int) string {
	data, err := os.ReadFile(o.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// serverAddr returns the address the replica's server (metrics or health
// probe) bound, from its "serving" log line, or "" before it is logged.
func (o *operator) serverAddr(server string) string {
	f, err := os.Open(o.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var line struct{ Msg, Server, Address string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "serving" && line.Server == server {
			return line.Address
		}
	}
	return ""
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
