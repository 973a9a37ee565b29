package harness

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kshard/kshard/internal/kitwriter"
)

// labelKey marks the ConfigMaps the test operator reconciles (a mirror of
// e2e/testoperator's constant, which a main package cannot export); the
// generation it reads is data[kitwriter.GenKey].
const labelKey = "kshard-e2e"

// Writer is the test kit's writer (internal/kitwriter).
type Writer = kitwriter.Writer

// CreateConfigMaps creates n labelled ConfigMaps cm-0000… at generation 1
// (recorded as writes) and returns their names; with PartitionBy
// "namespace", spread over the object namespaces (created here), and their
// keys "namespace/name".
func (h *Harness) CreateConfigMaps(n int) []string {
	h.t.Helper()
	ctx := context.Background()
	labels := map[string]string{labelKey: "1"}
	var names []string
	var err error
	if h.opts.spread() {
		namespaces := h.objectNamespaces()
		for _, ns := range namespaces {
			if _, err := h.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				h.t.Fatalf("creating namespace %s: %v", ns, err)
			}
		}
		names, err = kitwriter.CreateConfigMapsAcross(ctx, h.client, namespaces, labels, n, h.RecordDir())
	} else {
		names, err = kitwriter.CreateConfigMaps(ctx, h.client, h.opts.Namespace, labels, n, h.RecordDir())
	}
	if err != nil {
		h.t.Fatal(err)
	}
	h.mu.Lock()
	h.objects += len(names)
	h.mu.Unlock()
	return names
}

// ObjectCount is how many ConfigMaps CreateConfigMaps created.
func (h *Harness) ObjectCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.objects
}

// WatchedConfigMaps reads every ConfigMap the replicas watch from the API
// server: those of the harness's namespace, or of every namespace when the
// objects are spread (the replicas watch all namespaces then), labelled or
// not.
func (h *Harness) WatchedConfigMaps(ctx context.Context) ([]corev1.ConfigMap, error) {
	ns := h.opts.Namespace
	if h.opts.spread() {
		ns = metav1.NamespaceAll
	}
	list, err := h.client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the ConfigMaps: %w", err)
	}
	return list.Items, nil
}

// ConfigMaps reads the labelled ConfigMaps of this harness's namespace, or
// of its object namespaces when the objects are spread, from the API server.
func (h *Harness) ConfigMaps(ctx context.Context) ([]corev1.ConfigMap, error) {
	ns := h.opts.Namespace
	if h.opts.spread() {
		ns = metav1.NamespaceAll
	}
	list, err := h.client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: labelKey + "=1"})
	if err != nil {
		return nil, fmt.Errorf("listing the ConfigMaps: %w", err)
	}
	mine := make(map[string]bool, h.opts.ObjectNamespaces)
	for _, o := range h.objectNamespaces() {
		mine[o] = true
	}
	return slices.DeleteFunc(list.Items, func(cm corev1.ConfigMap) bool {
		return h.opts.spread() && !mine[cm.Namespace] // another test's
	}), nil
}

// deleteSpreadObjects deletes the ConfigMaps of the object namespaces
// (the harness's cleanup, after its replicas are gone). Errors are logged:
// the control plane may be down at the end of a failed test.
func (h *Harness) deleteSpreadObjects() {
	if !h.opts.spread() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, ns := range h.objectNamespaces() {
		err := h.client.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: labelKey + "=1"})
		if err != nil {
			h.t.Logf("deleting the ConfigMaps of %s at the end of the test: %v", ns, err)
			return
		}
	}
}

// objectNamespaces are the namespaces that hold the objects with
// PartitionBy "namespace": o0-<Namespace>, o1-<Namespace>… The number
// comes first because the API server's FNV-1a hash barely moves when only
// the last characters differ: <Namespace>-o0… would share one or two
// partitions (shard/README.md, "Balance").
func (h *Harness) objectNamespaces() []string {
	out := make([]string, h.opts.ObjectNamespaces)
	for i := range out {
		out[i] = fmt.Sprintf("o%d-%s", i, h.opts.Namespace)
	}
	return out
}

// StartWriter starts updating names (ConfigMaps from CreateConfigMaps) at
// about rate updates per second until Stop, which the test's cleanup also
// calls.
func (h *Harness) StartWriter(names []string, rate float64) *Writer {
	h.t.Helper()
	w, err := kitwriter.Start(h.client, h.opts.Namespace, names, rate, h.RecordDir())
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { w.Stop() })
	return w
}
