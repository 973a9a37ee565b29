package harness

import (
	"context"

	"github.com/kshard/kshard/manager/kshardtest"
)

// labelKey marks the ConfigMaps the test operator reconciles (a mirror of
// e2e/testoperator's constant, which a main package cannot export); the
// generation it reads is data[kshardtest.GenKey].
const labelKey = "kshard-e2e"

// Writer is the test kit's writer (kshardtest.Writer).
type Writer = kshardtest.Writer

// CreateConfigMaps creates n labelled ConfigMaps cm-0000… at generation 1
// (recorded as writes) and returns their names.
func (h *Harness) CreateConfigMaps(n int) []string {
	h.t.Helper()
	names, err := kshardtest.CreateConfigMaps(context.Background(), h.client, h.opts.Namespace, map[string]string{labelKey: "1"}, n, h.RecordDir())
	if err != nil {
		h.t.Fatal(err)
	}
	return names
}

// StartWriter starts updating names (ConfigMaps from CreateConfigMaps) at
// about rate updates per second until Stop, which the test's cleanup also
// calls.
func (h *Harness) StartWriter(names []string, rate float64) *Writer {
	h.t.Helper()
	w, err := kshardtest.StartWriter(h.client, h.opts.Namespace, names, rate, h.RecordDir())
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { w.Stop() })
	return w
}
