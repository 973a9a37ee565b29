package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kshard/kshard/e2e/harness"
	"github.com/kshard/kshard/internal/recorder"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
)

// TestCheckerCatchesDoubleReconciles runs the checker on a run that breaks
// the invariant on purpose: two rings over the same ConfigMaps, so that each
// key is reconciled by one replica of each. If the records, their merging or
// the checker lost an overlap, the scenario tests would pass vacuously.
func TestCheckerCatchesDoubleReconciles(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: runs a control plane and two replicas")
	}
	cp := controlplane.ForTest(t, controlplane.Options{})
	ha := harness.New(t, cp, harness.Options{Ring: "ring-a", Work: 50 * time.Millisecond})
	hb := harness.New(t, cp, harness.Options{Ring: "ring-b", Work: 50 * time.Millisecond})
	writer := ha.StartWriter(ha.CreateConfigMaps(20), 40)
	ha.StartReady(harness.Identity(0))
	hb.StartReady(harness.Identity(0))

	merged := t.TempDir()
	merge := func() *recorder.Log {
		for i, h := range []*harness.Harness{ha, hb} {
			paths, err := filepath.Glob(filepath.Join(h.RecordDir(), "*"+recorder.FileSuffix))
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range paths {
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				// Both harnesses name their own files alike; keep them apart.
				if err := os.WriteFile(filepath.Join(merged, string(rune('a'+i))+"-"+filepath.Base(p)), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		log, err := recorder.Load(merged)
		if err != nil {
			t.Fatal(err)
		}
		return log
	}
	var r recorder.Report
	ha.Await(30*time.Second, "the checker to see two rings reconcile one key at once", func() error {
		r = merge().Check()
		if len(r.Overlaps) == 0 || len(r.PartitionOverlaps) == 0 {
			return fmt.Errorf("records show %d key overlaps and %d partition overlaps", len(r.Overlaps), len(r.PartitionOverlaps))
		}
		return nil
	})
	writer.Stop()
	if r.OK() {
		t.Fatalf("report with overlaps is OK:\n%s", r)
	}
	t.Logf("as intended, the checker found %d key overlaps and %d partition overlaps, e.g. %s", len(r.Overlaps), len(r.PartitionOverlaps), r.Overlaps[0])
}
