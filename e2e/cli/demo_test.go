package cli_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDemo runs the demo as a user would in CI (stdout not a terminal) and
// checks that it converges, measures a handoff, exits 0 and leaves no
// process behind.
func TestDemo(t *testing.T) {
	skipIfShort(t)
	start := time.Now()
	r := kshard(t, 15*time.Minute, "demo", "--objects", "60", "--replicas", "2", "--timeout", "10m")
	t.Logf("demo took %s", time.Since(start).Round(100*time.Millisecond))
	if r.code != 0 {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	out := r.stdout
	if strings.Contains(out, "\x1b") {
		t.Error("stdout is not a terminal, yet the table uses escape sequences")
	}
	for _, want := range []string{
		"Ring formed in",
		"All 60 Widgets reconciled",
		"REPLICA", "CACHED", "CLAIMED", "HANDOFF", "RECONCILES", "PER SEC", "QUEUE",
		"cache mode labels",
		"example-operator-0", "example-operator-1", "example-operator-2",
		"example-operator-0 exited 0",
		"Demo finished in",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}

	// Every table is one read of the Leases: the partitions each replica
	// claims alone (CLAIMED - HANDOFF) never add up to more than the ring
	// has, which per-replica scrapes taken at different moments did.
	tables := 0
	for _, table := range demoTables(out) {
		tables++
		sole := 0
		for _, row := range table {
			claimed, err1 := strconv.Atoi(row["CLAIMED"])
			handoff, err2 := strconv.Atoi(row["HANDOFF"])
			if err1 != nil || err2 != nil || strings.Contains(row["LEASE"], "expired") {
				continue // no Lease, or an expired one: no live claim
			}
			sole += claimed - handoff
		}
		if sole > 271 {
			t.Errorf("a table shows %d partitions claimed by one live replica alone, over the ring's 271:\n%v", sole, table)
		}
	}
	if tables < 3 {
		t.Errorf("found %d tables in the demo's output, want several:\n%s", tables, out)
	}

	// The replicas ran the gate-free sharded cache on a control plane
	// without the feature gate: each cached a share, together every
	// Widget and ConfigMap once (60 Widgets, their 60 ConfigMaps and the
	// namespace's own, such as kube-root-ca.crt).
	cached := regexp.MustCompile(`Cached objects \(Lease annotation kshard.io/cached-objects\): (.*); together (\d+) = each of the (\d+) Widgets and ConfigMaps once`).FindStringSubmatch(out)
	if cached == nil {
		t.Errorf("no line showing each replica's share of the cache:\n%s", out)
	} else {
		shares := regexp.MustCompile(`example-operator-\d (\d+)`).FindAllStringSubmatch(cached[1], -1)
		watched, _ := strconv.Atoi(cached[3])
		if cached[2] != cached[3] || watched < 120 || len(shares) != 2 {
			t.Errorf("cache line %q: want two replicas' shares adding up to the 120 or more objects watched", cached[0])
		}
		for _, sh := range shares {
			if n, _ := strconv.Atoi(sh[1]); n <= 0 || n >= watched {
				t.Errorf("a replica caches %d of %d objects: want a share, not none or all", n, watched)
			}
		}
	}

	gap := regexp.MustCompile(`Handoff gap: (\S+) from SIGTERM until the other replicas claimed all (\d+) partitions`).FindStringSubmatch(out)
	if gap == nil {
		t.Fatalf("no handoff gap in stdout:\n%s", out)
	}
	d, err := time.ParseDuration(gap[1])
	// A graceful leave hands off within a watch round-trip plus drain,
	// far below the 10s lease duration a crash would cost.
	if err != nil || d <= 0 || d >= 10*time.Second {
		t.Errorf("handoff gap %q: want a duration in (0, 10s)", gap[1])
	}
	moved := regexp.MustCompile(`Partitions moved: (\d+) \(example-operator-1 (\d+)\)`).FindStringSubmatch(out)
	if moved == nil || moved[1] != gap[2] || moved[1] != moved[2] || moved[1] == "0" {
		t.Errorf("partitions moved %v do not match the leaver's %s partitions", moved, gap[2])
	}
	joined := regexp.MustCompile(`example-operator-2 joined: (\d+) partitions moved to it`).FindStringSubmatch(out)
	if joined == nil {
		t.Errorf("no join line in stdout")
	} else if n, _ := strconv.Atoi(joined[1]); n == 0 || n >= 271 {
		t.Errorf("join moved %d partitions, want some but not all", n)
	}
	t.Logf("handoff gap %s, %s partitions moved on leave, %s on join", gap[1], moved[1], joined[1])

	// Nothing may outlive the demo: neither the replicas (operatorBin) nor
	// the control plane (whose command lines name its directory).
	dir := regexp.MustCompile(`\(files in (\S+)\)`).FindStringSubmatch(r.stderr)
	if dir == nil {
		t.Fatalf("stderr does not say where the control plane lives:\n%s", r.stderr)
	}
	if left := append(processesMentioning(operatorBin), processesMentioning(dir[1])...); len(left) > 0 {
		t.Errorf("processes left behind:\n%s", strings.Join(left, "\n"))
	}
}

// demoTables returns the rows of every table the demo printed (plain
// output: a header line starting with REPLICA, rows up to a blank line), as
// maps from column name to cell, cut at the header's column positions.
func demoTables(out string) [][]map[string]string {
	var tables [][]map[string]string
	lines := strings.Split(out, "\n")
	for i := 0; i < len(lines); i++ {
		header := lines[i]
		if !strings.HasPrefix(header, "REPLICA ") {
			continue
		}
		var names []string
		var starts []int
		for _, m := range regexp.MustCompile(`\S+( \S+)?`).FindAllStringIndex(header, -1) {
			names = append(names, header[m[0]:m[1]])
			starts = append(starts, m[0])
		}
		var table []map[string]string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			row := map[string]string{}
			for j, start := range starts {
				end := len(lines[i])
				if j+1 < len(starts) {
					end = min(starts[j+1], end)
				}
				if start < end {
					row[names[j]] = strings.TrimSpace(lines[i][start:end])
				}
			}
			table = append(table, row)
		}
		tables = append(tables, table)
	}
	return tables
}
