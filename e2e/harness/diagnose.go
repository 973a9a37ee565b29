package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kshard/kshard/internal/process"
)

// diagnoseLogLines is how many of each replica's last log lines a
// diagnosis keeps.
const diagnoseLogLines = 80

// metricPrefixes select the /metrics series a diagnosis keeps: the ring's
// partitions by state (claimed, active, caching: waiting for the sharded
// cache, blocked by a peer…), readiness and the cache's per-kind figures.
var metricPrefixes = []string{"kshard_partitions", "kshard_ready", "kshard_ring_", "kshard_cache_", "kshard_fences_total"}

// Diagnose gathers what explains a ring that does not converge, for every
// live replica: its /readyz?verbose (checks, each kind's cache mode, and
// the partitions each partitioned kind holds and has synced), its ring and
// cache series from /metrics (partitions claimed, active, waiting for the
// cache, blocked), and the last diagnoseLogLines lines of its log; then the
// ring's Leases as `kshard status -o json` reads them. It writes them to a
// file in the test's directory (kept when the test fails), logs them, and
// returns the file's path. why heads the file. It never fails the test:
// what it cannot read, it says.
func (h *Harness) Diagnose(why string) string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var b strings.Builder
	fmt.Fprintf(&b, "diagnosis at %s: %s\n", time.Now().UTC().Format(time.RFC3339Nano), why)
	for _, id := range h.Live() {
		r := h.Replica(id)
		fmt.Fprintf(&b, "\n===== %s (incarnation %s, log %s)\n", id, r.Process.Incarnation, r.LogPath)
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		if body, err := h.Readyz(rctx, id); err != nil {
			fmt.Fprintf(&b, "--- /readyz?verbose: %v\n", err)
		} else {
			fmt.Fprintf(&b, "--- /readyz?verbose\n%s\n", strings.TrimSpace(body))
		}
		if lines, err := scrape(rctx, r, metricPrefixes); err != nil {
			fmt.Fprintf(&b, "--- /metrics: %v\n", err)
		} else {
			fmt.Fprintf(&b, "--- /metrics (%s)\n%s\n", strings.Join(metricPrefixes, ", "), strings.Join(lines, "\n"))
		}
		rcancel()
		fmt.Fprintf(&b, "--- last %d log lines\n%s\n", diagnoseLogLines, strings.TrimRight(r.proc.Tail(diagnoseLogLines), "\n"))
	}
	if ring, err := h.ReadRing(ctx); err != nil {
		fmt.Fprintf(&b, "\n===== ring status: %v\n", err)
	} else {
		status, _ := json.MarshalIndent(ring.Status, "", "  ")
		fmt.Fprintf(&b, "\n===== ring %s (as `kshard status -o json` reads the Leases)\n%s\n", ring, status)
	}
	path := filepath.Join(h.dir, fmt.Sprintf("diagnosis-%s.txt", time.Now().UTC().Format("150405.000")))
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		h.t.Logf("writing the diagnosis to %s: %v", path, err)
		path = ""
	}
	h.t.Logf("%s\n(written to %s)", b.String(), path)
	return path
}

// scrape reads r's /metrics and returns its samples (no comment lines)
// whose name begins with one of prefixes.
func scrape(ctx context.Context, r *Replica, prefixes []string) ([]string, error) {
	addr, err := r.ServingAddr(ctx, process.ServerMetrics)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("/metrics answered %s: %s", resp.Status, body)
	}
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) {
				out = append(out, line)
				break
			}
		}
	}
	return out, sc.Err()
}
