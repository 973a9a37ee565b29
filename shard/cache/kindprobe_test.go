package cache

import (
	"testing"

	"github.com/kshard/kshard/internal/cache/shardprobe"
)

// The cache mode a probe calls for, and which kinds are probed again.
func TestModeOfProbe(t *testing.T) {
	for _, tc := range []struct {
		probe   shardprobe.Result
		mode    string
		reprobe bool
	}{
		{shardprobe.Result{Filtered: true, Echoed: "x"}, ModeSharded, false},
		{shardprobe.Result{Filtered: true}, ModeSharded, false},
		{shardprobe.Result{Reason: "does not filter"}, ModeFallback, false},
		{shardprobe.Result{Retry: true, Reason: "no widgets exist"}, ModeFallback, true},
	} {
		m := modeOfProbe(tc.probe)
		if m.Mode != tc.mode || m.reprobe != tc.reprobe || m.Reason != tc.probe.Reason {
			t.Errorf("modeOfProbe(%+v) = %+v; want mode %s, reprobe %v, the probe's reason", tc.probe, m, tc.mode, tc.reprobe)
		}
	}
}
