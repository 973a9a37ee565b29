package app

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kshard/kshard/manager"
	"github.com/kshard/kshard/shard"
)

// TestHelpDocumentsEveryFlag: --help exits 0 and lists every flag the
// operator defines as the docs write it (--name, never -name), each with a
// description and its default.
func TestHelpDocumentsEveryFlag(t *testing.T) {
	var out bytes.Buffer
	if code := Main([]string{"--help"}, &out); code != 0 {
		t.Fatalf("--help exited %d", code)
	}
	help := out.String()
	// One block per flag: "  --name type\n    \tusage (default x)\n".
	blocks := map[string]string{}
	for _, b := range strings.Split(help, "\n  --")[1:] {
		blocks[strings.Fields(b)[0]] = b
	}
	if strings.Contains(help, "\n  -") && strings.Count(help, "\n  -") != strings.Count(help, "\n  --") {
		t.Errorf("--help lists a flag with one dash:\n%s", help)
	}
	n := 0
	newFlagSet(&config{}).VisitAll(func(f *flag.Flag) {
		n++
		b, ok := blocks[f.Name]
		switch {
		case !ok:
			t.Errorf("--help does not list --%s", f.Name)
		case len(f.Usage) < 20 || !strings.Contains(b, f.Usage[:20]):
			t.Errorf("--%s has no real description in --help: %q", f.Name, b)
		case f.DefValue != "" && f.DefValue != "0" && f.DefValue != "0s" && f.DefValue != "false" && !strings.Contains(b, "(default "):
			t.Errorf("--help does not show --%s's default %s: %q", f.Name, f.DefValue, b)
		}
	})
	if n < 20 {
		t.Errorf("only %d flags defined; the flag set under test is not the operator's", n)
	}
	for _, want := range []string{"--ring string\n", `(default "example-operator")`, "--lease-duration duration\n", "(default 10s)", "--keep-place-on-leave\n"} {
		if !strings.Contains(help, want) {
			t.Errorf("--help lacks %q:\n%s", want, help)
		}
	}
}

// TestFlagErrors: a bad command line is one line on stderr, exit code 2,
// naming the flag with two dashes and what it wants; a flag given with one
// dash is still accepted, as the flag package does.
func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--frob"}, "unknown flag --frob; run example-operator --help"},
		{[]string{"-frob"}, "unknown flag --frob"},
		{[]string{"--ring"}, "flag --ring needs a value"},
		{[]string{"--lease-duration", "soon"}, `invalid value "soon" for --lease-duration: want a duration such as 10s`},
		{[]string{"--workers=x"}, `invalid value "x" for --workers: want a number`},
		{[]string{"--install-crd=maybe"}, `invalid value "maybe" for --install-crd: want true or false`},
		{[]string{"extra"}, `unexpected arguments ["extra"]`},
	} {
		var out bytes.Buffer
		code := Main(tc.args, &out)
		if code != exitUsage || strings.Count(out.String(), "\n") != 1 || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line containing %q", tc.args, code, out.String(), tc.want)
		}
	}
	if c, err := parseFlags([]string{"-ring=other", "--workers", "7"}); err != nil || c.mgr.Ring != "other" || c.workers != 7 {
		t.Errorf("-ring=other --workers 7: %+v, %v", c, err)
	}
}

// TestKubeconfigFlag: the operator takes its configuration through
// manager.LoadConfig: --kubeconfig wins over $KUBECONFIG, and a missing
// file is an error naming it.
func TestKubeconfigFlag(t *testing.T) {
	dir := t.TempDir()
	write := func(name, server string) string {
		p := filepath.Join(dir, name)
		cfg := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"" + server + "\"}}]\n" +
			"contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {token: t}}]\n"
		if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flagFile, envFile := write("flag", "https://flag.example:6443"), write("env", "https://env.example:6443")
	t.Setenv("KUBECONFIG", envFile)
	cfg, err := loadConfig(flagFile)
	if err != nil || cfg.Host != "https://flag.example:6443" {
		t.Errorf("--kubeconfig %s: host %v, err %v; want the flag's file", flagFile, cfg, err)
	}
	// Without the flag, manager.GetConfig's order: $KUBECONFIG first.
	if cfg, err := loadConfig(""); err != nil || cfg.Host != "https://env.example:6443" {
		t.Errorf("no --kubeconfig: host %v, err %v; want $KUBECONFIG's", cfg, err)
	}
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("clusters: [unterminated\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(garbage); err == nil || !strings.Contains(err.Error(), "cannot use --kubeconfig "+garbage) || !strings.Contains(err.Error(), "fix the file") {
		t.Errorf("--kubeconfig %s (not YAML): %v", garbage, err)
	}
	var out bytes.Buffer
	missing := filepath.Join(dir, "missing")
	// The file is read before anything is started: the command fails at once.
	if code := Main([]string{"--kubeconfig", missing}, &out); code != exitError || !strings.Contains(out.String(), "--kubeconfig "+missing+" does not exist") || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("--kubeconfig %s: exit %d, stderr %q", missing, code, out.String())
	}
}

// TestRateLimitFlags: the client rate limits reach the manager's options,
// with the manager's defaults when unset.
func TestRateLimitFlags(t *testing.T) {
	c, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.mgr.QPS != manager.DefaultQPS || c.mgr.Burst != manager.DefaultBurst {
		t.Errorf("defaults: QPS %v burst %d, want the manager's %v and %d", c.mgr.QPS, c.mgr.Burst, manager.DefaultQPS, manager.DefaultBurst)
	}
	c, err = parseFlags([]string{"--kube-api-qps=12.5", "--kube-api-burst=40"})
	if err != nil {
		t.Fatal(err)
	}
	if c.mgr.QPS != 12.5 || c.mgr.Burst != 40 {
		t.Errorf("QPS %v burst %d, want 12.5 and 40", c.mgr.QPS, c.mgr.Burst)
	}
}

// TestPartitionByFlag: key (default) and namespace reach the manager; uid
// and anything else fail naming the flag.
func TestPartitionByFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want shard.Scheme
		err  string
	}{
		{nil, shard.SchemeKey, ""},
		{[]string{"--partition-by=namespace"}, shard.SchemeNamespace, ""},
		{[]string{"--partition-by=uid"}, "", "--partition-by"},
		{[]string{"--partition-by=name"}, "", "--partition-by"},
		{[]string{"--partition-by=namespace", "--watch-namespace=apps"}, "", "drop --watch-namespace"},
		{[]string{"--partition-by=key", "--watch-namespace=apps"}, shard.SchemeKey, ""},
	} {
		c, err := parseFlags(tc.args)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%v: error %v, want one naming %s", tc.args, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.err == "" && c.mgr.PartitionBy != tc.want:
			t.Errorf("%v: PartitionBy %q, want %q", tc.args, c.mgr.PartitionBy, tc.want)
		}
	}
}

// TestCacheModeFlags: --cache-mode, --label-qps and --cache-check-interval
// reach the manager; the manager's default applies when unset; bad values
// and combinations fail naming the flag.
func TestCacheModeFlags(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		mode  manager.CacheMode
		qps   float64
		err   string
		check time.Duration
	}{
		{nil, "", 0, "", 0},
		{[]string{"--cache-mode=labels"}, manager.CacheLabels, 0, "", 0},
		{[]string{"--cache-mode=labels", "--label-qps=50"}, manager.CacheLabels, 50, "", 0},
		{[]string{"--cache-mode=full"}, manager.CacheFull, 0, "", 0},
		{[]string{"--cache-mode=labels", "--partition-by=namespace"}, manager.CacheLabels, 0, "", 0},
		{[]string{"--cache-mode=server", "--partition-by=namespace"}, manager.CacheServer, 0, "", 0},
		{[]string{"--cache-mode=server"}, "", 0, "--cache-mode=server needs --partition-by=namespace", 0},
		{[]string{"--cache-mode=label"}, "", 0, `--cache-mode must be "full", "labels" or "server"`, 0},
		{[]string{"--cache-mode=labels", "--label-qps=-1"}, "", 0, "--label-qps must be a positive number", 0},
		{[]string{"--cache-mode=labels", "--label-qps=NaN"}, "", 0, "--label-qps must be a positive number", 0},
		{[]string{"--label-qps=10"}, "", 0, "--label-qps applies only with --cache-mode=labels", 0},
		{[]string{"--cache-mode=labels", "--cache-check-interval=1m"}, manager.CacheLabels, 0, "", time.Minute},
		{[]string{"--cache-mode=labels", "--cache-check-interval=-1s"}, manager.CacheLabels, 0, "", -time.Second},
		{[]string{"--cache-mode=labels", "--cache-check-interval=10ms"}, "", 0, "--cache-check-interval must be at least 1s", 0},
		{[]string{"--cache-check-interval=1m"}, "", 0, "--cache-check-interval applies only with --cache-mode=labels", 0},
	} {
		c, err := parseFlags(tc.args)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.err == "" && (c.mgr.CacheMode != tc.mode || c.mgr.LabelQPS != tc.qps || c.mgr.CacheCheckInterval != tc.check):
			t.Errorf("%v: CacheMode %q LabelQPS %v CacheCheckInterval %v, want %q %v %v", tc.args, c.mgr.CacheMode, c.mgr.LabelQPS, c.mgr.CacheCheckInterval, tc.mode, tc.qps, tc.check)
		}
	}
}

// TestMetricsAndLogFlags: metrics are secure on :8443 by default, plain
// HTTP is an explicit choice, the certificate flags go together, and
// --v reaches the logger.
func TestMetricsAndLogFlags(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		secure bool
		err    string
	}{
		{args: nil, secure: true},
		{args: []string{"--metrics-secure=false", "--metrics-bind-address=:8080"}, secure: false},
		{args: []string{"--metrics-cert-file=/tls/tls.crt", "--metrics-key-file=/tls/tls.key"}, secure: true},
		{args: []string{"--metrics-cert-file=/tls/tls.crt"}, err: "--metrics-key-file"},
		{args: []string{"--metrics-secure=false", "--metrics-cert-file=/c", "--metrics-key-file=/k"}, err: "needs --metrics-secure"},
		{args: []string{"--v=-1"}, err: "--v must not be negative"},
		{args: []string{"--v=2"}, secure: true},
	} {
		c, err := parseFlags(tc.args)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.err == "" && c.mgr.MetricsSecure != tc.secure:
			t.Errorf("%v: MetricsSecure %v, want %v", tc.args, c.mgr.MetricsSecure, tc.secure)
		case tc.args == nil && c.mgr.MetricsBindAddress != ":8443":
			t.Errorf("default metrics address %q, want :8443", c.mgr.MetricsBindAddress)
		}
	}
}
