package e2e_test

import (
	"os"
	"strings"
	"testing"

	"github.com/kshard/kshard/e2e/harness"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
)

// TestDiagnosisExplainsEachReplica checks what the chaos suites log when a
// ring does not converge (harness.Diagnose), on a converged ring of two
// replicas cached by labels at --v=1: per replica the partitions each
// partitioned kind holds and has synced (/readyz?verbose), the ring's
// partitions by state (/metrics), its last log lines with the V(1) lines,
// and the ring's Leases as `kshard status -o json` reads them.
func TestDiagnosisExplainsEachReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: runs a control plane and two replicas")
	}
	cp := controlplane.ForTest(t, controlplane.Options{})
	h := harness.New(t, cp, harness.Options{Ring: "diagnose", CacheMode: "labels", ObjectNamespaces: 2, Verbosity: 1})
	h.CreateConfigMaps(20)
	h.StartReady(harness.Identity(0), harness.Identity(1))
	h.WaitConverged(convergeTimeout)
	path := h.Diagnose("a test of the diagnosis")
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"===== r-0 ", "===== r-1 ",
		"[i]cache-partitions: /v1, Kind=ConfigMap holds ",
		"unlabelled views",
		`kshard_partitions{state="active"}`,
		`kshard_partitions{state="caching"} 0`,
		`"level":1`, // the V(1) lines of --v=1
		"activating partitions",
		`"ringMembers": [`,
	} {
		if strings.Count(string(text), want) == 0 {
			t.Errorf("the diagnosis lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("diagnosis:\n%s", text)
	}
}
