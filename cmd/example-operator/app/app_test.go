package app

import (
	"bytes"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/kshard/kshard/manager"
	"github.com/kshard/kshard/shard"
)

// TestHelpDocumentsEveryFlag: --help exits 0 and lists every flag the
// operator defines, each with a description and its default.
func TestHelpDocumentsEveryFlag(t *testing.T) {
	var out bytes.Buffer
	if code := Main([]string{"--help"}, &out); code != 0 {
		t.Fatalf("--help exited %d", code)
	}
	// PrintDefaults writes "  -name type\n    \tusage (default x)\n" per flag.
	blocks := map[string]string{}
	for _, b := range strings.Split(out.String(), "\n  -")[1:] {
		name, _, _ := strings.Cut(strings.Fields(b)[0], "\n")
		blocks[name] = b
	}
	n := 0
	newFlagSet(&config{}).VisitAll(func(f *flag.Flag) {
		n++
		b, ok := blocks[f.Name]
		switch {
		case !ok:
			t.Errorf("--help does not list -%s", f.Name)
		case len(f.Usage) < 20 || !strings.Contains(b, f.Usage[:20]):
			t.Errorf("-%s has no real description in --help: %q", f.Name, b)
		case f.DefValue != "" && f.DefValue != "0" && f.DefValue != "0s" && f.DefValue != "false" && !strings.Contains(b, "(default "):
			t.Errorf("--help does not show -%s's default %s: %q", f.Name, f.DefValue, b)
		}
	})
	if n < 20 {
		t.Errorf("only %d flags defined; the flag set under test is not the operator's", n)
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
