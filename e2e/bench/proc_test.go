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
