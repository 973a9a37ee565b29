package main

import (
	"strings"
	"testing"
)

func TestMetricsSumReadsHistogramCountAndSum(t *testing.T) {
	text := `# TYPE kshard_handoff_seconds histogram
kshard_handoff_seconds_bucket{le="0.1"} 3
kshard_handoff_seconds_bucket{le="+Inf"} 5
kshard_handoff_seconds_sum 1.25
kshard_handoff_seconds_count 5
# TYPE kshard_fences_total counter
kshard_fences_total 2
`
	m, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{
		"kshard_handoff_seconds_count": 5, "kshard_handoff_seconds_sum": 1.25,
		"kshard_fences_total": 2, "kshard_fences_total_count": 0, "missing_count": 0,
	} {
		if got := m.sum(name, nil); got != want {
			t.Errorf("sum(%s) = %v, want %v", name, got, want)
		}
	}
}

func TestStatusBytesReadsPeakAndCurrentRSS(t *testing.T) {
	status := []byte("Name:\tkshardop\nVmPeak:\t 2000000 kB\nVmHWM:\t  123456 kB\nVmRSS:\t   65432 kB\nThreads:\t12\n")
	if got := statusBytes(status, "VmHWM:"); got != 123456*1024 {
		t.Errorf("VmHWM = %d bytes", got)
	}
	if got := statusBytes(status, "VmRSS:"); got != 65432*1024 {
		t.Errorf("VmRSS = %d bytes", got)
	}
	if got := statusBytes(status, "VmSwap:"); got != 0 {
		t.Errorf("absent VmSwap = %d bytes, want 0", got)
	}
}

// kindMode reads the mode kshard_cache_mode names for one kind, among the
// series of every kind.
func TestKindModeReadsOneKind(t *testing.T) {
	m, err := parseMetrics(strings.NewReader(`# TYPE kshard_cache_mode gauge
kshard_cache_mode{kind="/v1, Kind=ConfigMap",mode="full"} 1
kshard_cache_mode{kind="bench.kshard.io/v1, Kind=BenchObject",mode="labels"} 1
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := kindMode(m, benchObjects); got != "labels" {
		t.Errorf("BenchObject mode %q, want labels", got)
	}
	if got := kindMode(m, configMaps); got != "full" {
		t.Errorf("ConfigMap mode %q, want full", got)
	}
	if got := kindMode(metrics{}, configMaps); got != "" {
		t.Errorf("mode %q of a kind not cached, want none", got)
	}
}

func TestParseProcStatCountsIdleAndIOWaitAsNotBusy(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice:
	// guest time is inside user already, so it is not added again.
	stat := []byte("cpu  100 5 40 800 20 3 2 1 50 0\ncpu0 50 2 20 400 10 1 1 0 25 0\nintr 12345\n")
	busy, nice, total, err := parseProcStat(stat)
	if err != nil {
		t.Fatal(err)
	}
	// Busy leaves out nice (5) as well as idle and iowait.
	if total != 971 || busy != 146 || nice != 5 {
		t.Errorf("busy, nice, total = %v, %v, %v; want 146, 5, 971", busy, nice, total)
	}
	for _, bad := range []string{"", "intr 1 2 3\n", "cpu 1 2 3\n", "cpu 1 2 x 4 5 6 7 8\n"} {
		if _, _, _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q) = nil error, want one naming the line", bad)
		}
	}
}

func TestNiceOf(t *testing.T) {
	// pid (comm with ") " inside) state ppid ... priority nice ...
	stat := []byte("4242 (a) b) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 39 19 1 0 100 1000 50 18446744073709551615\n")
	n, err := niceOf(stat)
	if err != nil || n != 19 {
		t.Errorf("niceOf = %d, %v; want 19", n, err)
	}
	if _, err := niceOf([]byte("4242 (a) S 1")); err == nil {
		t.Error("niceOf of a short line: no error")
	}
}
