package operator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/internal/testwait"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
)

// result is one finished run of the binary.
type result struct {
	code   int
	stderr string
}

// runOperator runs the binary to completion. A run that does not finish
// within timeout is a hang, which these tests exist to rule out: it is killed
// and fails the test.
func runOperator(t *testing.T, timeout time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, operatorBin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("example-operator %s did not exit within %s (killed)\nstderr:\n%s", strings.Join(args, " "), timeout, stderr.String())
	}
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("running example-operator: %v", err)
	}
	if stdout.Len() > 0 {
		t.Errorf("stdout is not empty: %q", stdout.String())
	}
	return result{code: cmd.ProcessState.ExitCode(), stderr: stderr.String()}
}

// klogLine matches klog's text header (E1123 12:00:00.000000 ...), which
// must not leak onto the terminal.
var klogLine = regexp.MustCompile(`^[IWEF]\d{4} \d\d:\d\d:\d\d`)

// checkOneLineError checks that stderr ends with exactly one plain line,
// "example-operator: ..." containing every want, and that whatever precedes
// it is structured retry logging (allowRetryLogs), never a stack trace or
// klog text.
func checkOneLineError(t *testing.T, stderr string, allowRetryLogs bool, want ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	if !strings.HasSuffix(stderr, "\n") || stderr == "" {
		t.Errorf("stderr does not end in one complete line: %q", stderr)
		return
	}
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "example-operator: ") {
		t.Errorf("last stderr line %q does not start with \"example-operator: \"", last)
	}
	for _, w := range want {
		if !strings.Contains(last, w) {
			t.Errorf("error line %q does not mention %q", last, w)
		}
	}
	if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic") {
		t.Errorf("stderr holds a stack trace:\n%s", stderr)
	}
	before := lines[:len(lines)-1]
	if !allowRetryLogs && len(before) > 0 {
		t.Errorf("stderr has %d lines, want exactly one:\n%s", len(lines), stderr)
		return
	}
	for _, l := range before {
		var entry struct{ Msg string }
		if klogLine.MatchString(l) || json.Unmarshal([]byte(l), &entry) != nil || !strings.Contains(entry.Msg, "Retrying") {
			t.Errorf("stderr line before the error is not a structured retry notice: %q", l)
		}
	}
}

// TestBadInput runs the binary with what users get wrong. Each run must end
// promptly with a non-zero exit code and one line naming the problem and the
// fix.
func TestBadInput(t *testing.T) {
	skipIfShort(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.kubeconfig")
	garbage := filepath.Join(dir, "garbage.kubeconfig")
	if err := os.WriteFile(garbage, []byte("clusters: [unterminated\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A kubeconfig whose server nothing listens on, like a cluster that is
	// down: port 1 is privileged, so no test or engineer on this machine can
	// be listening there, and connecting is refused at once.
	deadServer := "https://127.0.0.1:1"
	unreachable := writeKubeconfig(t, dir, "unreachable.kubeconfig", deadServer)

	// Ports are disabled so no run depends on :8080/:8081 being free.
	base := []string{"--identity", "bad-input", "--lease-namespace", "default", "--metrics-bind-address", "0", "--health-probe-bind-address", "0"}
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		retries bool // structured retry logs may precede the error line
		want    []string
	}{
		{name: "unknown flag", args: []string{"--no-such-flag"}, code: 2,
			want: []string{"unknown flag --no-such-flag", "--help"}},
		{name: "stray argument", args: []string{"run"}, code: 2,
			want: []string{`"run"`, "flags only"}},
		{name: "invalid duration", args: []string{"--lease-duration=abc"}, code: 2,
			want: []string{"--lease-duration", `"abc"`, "duration such as 10s"}},
		{name: "invalid number", args: []string{"--kube-api-qps=fast"}, code: 2,
			want: []string{"--kube-api-qps", "want a number"}},
		{name: "non-positive qps", args: []string{"--kube-api-qps=0"}, code: 2,
			want: []string{"--kube-api-qps", "positive"}},
		{name: "renew deadline not below lease duration", args: []string{"--lease-duration=5s", "--renew-deadline=5s"}, code: 2,
			want: []string{"--renew-deadline (5s)", "--lease-duration (5s)", "lower --renew-deadline or raise --lease-duration"}},
		{name: "renew period not below default renew deadline", args: []string{"--lease-duration=3s", "--renew-period=2s"}, code: 2,
			want: []string{"--renew-period (2s)", "--renew-deadline (2s", "lower --renew-period"}},
		{name: "zero workers", args: []string{"--workers=0"}, code: 2,
			want: []string{"--workers", "at least 1"}},
		{name: "unknown cache mode", args: []string{"--cache-mode=sharded"}, code: 2,
			want: []string{"--cache-mode", `"sharded"`, `"labels"`}},
		{name: "server cache mode under key partitioning", args: []string{"--cache-mode=server"}, code: 2,
			want: []string{"--cache-mode=server needs --partition-by=namespace", "--cache-mode=labels"}},
		{name: "kubeconfig does not exist", args: []string{"--kubeconfig", missing}, code: 1,
			want: []string{"--kubeconfig " + missing, "does not exist", "leave the flag out"}},
		{name: "kubeconfig cannot be parsed", args: []string{"--kubeconfig", garbage}, code: 1,
			want: []string{"--kubeconfig " + garbage, "fix the file"}},
		{name: "API server unreachable", args: []string{"--kubeconfig", unreachable, "--api-server-wait=3s"}, code: 1, retries: true,
			want: []string{deadServer, "did not answer within --api-server-wait 3s", "connection refused", "check the kubeconfig's server address"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			r := runOperator(t, 2*time.Minute, append(append([]string(nil), base...), tc.args...)...)
			if r.code != tc.code {
				t.Errorf("exit code %d, want %d", r.code, tc.code)
			}
			checkOneLineError(t, r.stderr, tc.retries, tc.want...)
			t.Logf("exit %d after %s: %s", r.code, time.Since(start).Round(time.Millisecond), strings.TrimSpace(r.stderr[strings.LastIndex(strings.TrimSuffix(r.stderr, "\n"), "\n")+1:]))
		})
	}
}

// TestHelpDocumentsFlags: --help exits 0 and documents, with its default,
// every flag a user deploying the operator needs, and the exit codes.
func TestHelpDocumentsFlags(t *testing.T) {
	skipIfShort(t)
	r := runOperator(t, time.Minute, "--help")
	if r.code != 0 {
		t.Fatalf("--help exited %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{
		"Usage: example-operator [flags]", "Exit codes:",
		"--kubeconfig", "--ring", "--identity", "--lease-namespace", "--watch-namespace", "--partitions",
		"--lease-duration", "--renew-period", "--renew-deadline", "--drain-grace", "--shutdown-timeout",
		"--metrics-bind-address", "--metrics-secure", "--metrics-cert-file", "--health-probe-bind-address", "--v", "--workers", "--work-delay", "--reconcile-timeout",
		"--kube-api-qps", "--kube-api-burst", "(default 50)", "(default 100)",
		"--api-server-wait", "0 retries forever", "--install-crd",
		"--cache-mode", "no feature gate", "--label-qps",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("--help does not mention %q", want)
		}
	}
}

// TestClusterProblems runs the binary against a live API server that cannot
// serve it: refused credentials and a missing Widget CRD exit 1 at once with
// one line saying what to do; with --install-crd the operator installs the
// CRD itself, works, and leaves cleanly on SIGTERM.
func TestClusterProblems(t *testing.T) {
	skipIfShort(t)
	cp := controlplane.ForTest(t, controlplane.Options{})
	cfg := cp.Config()
	client := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	ctx := context.Background()
	flags := []string{"--identity", "solo", "--lease-namespace", "default", "--metrics-bind-address", "0", "--health-probe-bind-address", "127.0.0.1:0"}
	args := append([]string{"--kubeconfig", cp.KubeconfigPath()}, flags...)

	t.Run("refused credentials", func(t *testing.T) {
		kc := writeKubeconfig(t, t.TempDir(), "stranger.kubeconfig", cp.Host())
		start := time.Now()
		r := runOperator(t, 2*time.Minute, append([]string{"--kubeconfig", kc}, flags...)...)
		if r.code != 1 {
			t.Errorf("exit code %d, want 1", r.code)
		}
		checkOneLineError(t, r.stderr, false, cp.Host(), "refused the credentials", "check the kubeconfig's user")
		t.Logf("exit %d after %s: %s", r.code, time.Since(start).Round(time.Millisecond), strings.TrimSpace(r.stderr))
	})

	t.Run("missing CRD", func(t *testing.T) {
		start := time.Now()
		r := runOperator(t, 2*time.Minute, args...)
		if r.code != 1 {
			t.Errorf("exit code %d, want 1", r.code)
		}
		checkOneLineError(t, r.stderr, false, "does not serve widgets.demo.kshard.io/v1alpha1", "kubectl apply -f deploy/crd.yaml", "--install-crd")
		t.Logf("exit %d after %s: %s", r.code, time.Since(start).Round(time.Millisecond), strings.TrimSpace(r.stderr))
	})

	t.Run("install-crd", func(t *testing.T) {
		o := startOperator(t, "solo", nil, append(args, "--install-crd")...)
		awaitWidgetsServed(t, dyn)
		testwait.NoError(t, 250*time.Millisecond, 3*time.Minute, "solo's Lease active with every partition", func() error {
			l, err := client.CoordinationV1().Leases("default").Get(ctx, lease.LeaseName(ring, "solo"), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if obs := membership.Parse(l, ring, ringCfg.Partitions); obs.State != handoff.StateActive || obs.Claim.Len() != ringCfg.Partitions {
				return fmt.Errorf("Lease is %s with %d partitions", obs.State, obs.Claim.Len())
			}
			return nil
		})
		w := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": widgetGVR.GroupVersion().String(), "kind": "Widget",
			"metadata": map[string]any{"name": "first", "namespace": "default"},
			"spec":     map[string]any{"color": "red", "size": int64(1)},
		}}
		if _, err := dyn.Resource(widgetGVR).Namespace("default").Create(ctx, w, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		testwait.NoError(t, 250*time.Millisecond, 3*time.Minute, "Widget reconciled by solo", func() error {
			got, err := dyn.Resource(widgetGVR).Namespace("default").Get(ctx, "first", metav1.GetOptions{})
			if err != nil {
				return err
			}
			by, _, _ := unstructured.NestedString(got.Object, "status", "reconciledBy")
			observed, _, _ := unstructured.NestedInt64(got.Object, "status", "observedGeneration")
			if by != "solo" || observed != got.GetGeneration() {
				return fmt.Errorf("status reconciledBy %q observedGeneration %d (generation %d)", by, observed, got.GetGeneration())
			}
			_, err = client.CoreV1().ConfigMaps("default").Get(ctx, "widget-first", metav1.GetOptions{})
			return err
		})
		if code := o.stop(t, 2*time.Minute); code != 0 {
			t.Errorf("exit code %d after SIGTERM, want 0", code)
		}
		if _, err := client.CoordinationV1().Leases("default").Get(ctx, lease.LeaseName(ring, "solo"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Lease after exit: %v, want NotFound", err)
		}
	})
}

// writeKubeconfig writes a kubeconfig for server with a token no API server
// knows (TLS unverified) and returns its path.
func writeKubeconfig(t *testing.T, dir, name, server string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "token"}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u", Namespace: corev1.NamespaceDefault}
	cfg.CurrentContext = "c"
	path := filepath.Join(dir, name)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
