package alertcheck

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var metricName = regexp.MustCompile(`kshard_[a-z_]+`)

// exported collects the kshard_* metric names kshard's code registers:
// every string literal naming one in the non-test Go files of the
// packages that register metrics, in both runtimes (the root module's
// lease, manager, controller and shard packages and the internal packages
// behind them, such as the Lease membership's internal/membership, and
// the adapter, controller/crshard).
func exported(t *testing.T) map[string]bool {
	t.Helper()
	literal := regexp.MustCompile(`"(kshard_[a-z_]+)"`)
	names := map[string]bool{}
	for _, dir := range []string{"lease", "manager", "controller", "shard", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range literal.FindAllSubmatch(b, -1) {
				names[string(m[1])] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// One name from each place metrics are defined, so that a move of
	// those files out of the scan fails here, naming the metric.
	for _, want := range []string{"kshard_ring_members", "kshard_ring_unclaimed_partitions", "kshard_cache_label_backlog", "kshard_drain_overdue_total", "kshard_lease_renew_errors_total"} {
		if !names[want] {
			t.Fatalf("the scan of the sources found no %s: is it still defined as a string literal? (found %d names)", want, len(names))
		}
	}
	return names
}

// unknown returns the kshard_* names of expr that kshard does not export
// (a histogram's _bucket, _sum and _count series count as its own).
func unknown(expr string, names map[string]bool) []string {
	var out []string
	for _, n := range metricName.FindAllString(expr, -1) {
		base := n
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if s, ok := strings.CutSuffix(n, suffix); ok && names[s] {
				base = s
			}
		}
		if !names[base] {
			out = append(out, n)
		}
	}
	return out
}

// TestUnknownIsCaught: the check itself rejects a misspelt name and
// accepts a histogram's series.
func TestUnknownIsCaught(t *testing.T) {
	names := map[string]bool{"kshard_handoff_seconds": true, "kshard_ready": true}
	if got := unknown(`rate(kshard_handoff_seconds_bucket[5m]) + kshard_readyy`, names); !slices.Equal(got, []string{"kshard_readyy"}) {
		t.Fatalf("unknown = %v, want [kshard_readyy]", got)
	}
}

// TestDashboardIsGenerated: the committed dashboard is Dashboard's output.
func TestDashboardIsGenerated(t *testing.T) {
	want, err := Dashboard()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(filepath.Join(root, DashboardFile), want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(read(t, DashboardFile), want) {
		t.Fatalf("%s is not generated from dashboard.go: run (cd hack/alertcheck && go test . -update)", DashboardFile)
	}
}

// TestQueriesNameExportedMetrics: every kshard_* metric the dashboard's
// queries and the alert rules name is one kshard exports, and each
// query names at least one.
func TestQueriesNameExportedMetrics(t *testing.T) {
	names := exported(t)
	queries, err := Queries(read(t, DashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(queries) < 20 {
		t.Fatalf("%d queries read from %s; the panels' targets were not found", len(queries), DashboardFile)
	}
	for _, q := range queries {
		if len(metricName.FindAllString(q, -1)) == 0 {
			t.Errorf("dashboard query %q names no kshard metric", q)
		}
		if bad := unknown(q, names); len(bad) > 0 {
			t.Errorf("dashboard query %q names %v, which kshard does not export", q, bad)
		}
	}
	for _, r := range loadRulesYAML(t) {
		if bad := unknown(r, names); len(bad) > 0 {
			t.Errorf("alert expression %q names %v, which kshard does not export", r, bad)
		}
	}
}
