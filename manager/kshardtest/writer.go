package kshardtest

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/internal/kitwriter"
	"github.com/kshard/kshard/shard/cache"
)

// ConfigMapGen is a GenFunc for the kit's ConfigMaps, read from c (the
// manager's cache).
func ConfigMapGen(c *cache.Cache) GenFunc {
	return func(ctx context.Context, req controller.Request) (int64, bool, error) {
		var cm corev1.ConfigMap
		if err := c.Get(ctx, req.NamespacedName, &cm); err != nil {
			if apierrors.IsNotFound(err) {
				return 0, false, nil
			}
			return 0, false, err
		}
		gen, err := strconv.ParseInt(cm.Data[kitwriter.GenKey], 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("ConfigMap %s: data[%q] = %q is not a generation: %w", req.NamespacedName, kitwriter.GenKey, cm.Data[kitwriter.GenKey], err)
		}
		return gen, true, nil
	}
}

// IsObject is a predicate function selecting the kit's ConfigMaps, for
// controller.NewPredicateFuncs.
func IsObject(o controller.Object) bool {
	return o.GetLabels()[kitwriter.Label] == kitwriter.LabelValue
}

// CreateConfigMaps creates n of the kit's ConfigMaps at generation 1 in
// the Env's namespace, records the creations as writes and returns their
// names.
func (e *Env) CreateConfigMaps(n int) []string {
	e.t.Helper()
	names, err := kitwriter.CreateConfigMaps(context.Background(), e.client, e.opts.Namespace, map[string]string{kitwriter.Label: kitwriter.LabelValue}, n, e.RecordDir())
	if err != nil {
		e.t.Fatal(err)
	}
	return names
}

// CreateConfigMapsAcross is CreateConfigMaps spreading the n ConfigMaps
// round robin over namespaces (which must exist), for rings that partition
// by namespace. It returns their keys "namespace/name", which StartWriter
// takes in place of names.
func (e *Env) CreateConfigMapsAcross(namespaces []string, n int) []string {
	e.t.Helper()
	keys, err := kitwriter.CreateConfigMapsAcross(context.Background(), e.client, namespaces, map[string]string{kitwriter.Label: kitwriter.LabelValue}, n, e.RecordDir())
	if err != nil {
		e.t.Fatal(err)
	}
	return keys
}

// Writer is the kit's writer that StartWriter started: it keeps bumping
// the generation of its ConfigMaps, round robin, and records every
// acknowledged update.
type Writer struct {
	w *kitwriter.Writer
}

// StartWriter starts bumping the generation of names (from
// CreateConfigMaps, or keys from CreateConfigMapsAcross), round robin, at
// about rate updates per second until Writer.Stop or the end of the test.
func (e *Env) StartWriter(names []string, rate float64) *Writer {
	e.t.Helper()
	w, err := kitwriter.Start(e.client, e.opts.Namespace, names, rate, e.RecordDir())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { w.Stop() })
	return &Writer{w: w}
}

// Stop stops the writer, waits for it, and returns how many updates were
// acknowledged and how many failed. Calling it again returns the same.
func (w *Writer) Stop() (writes, failures int, lastErr error) { return w.w.Stop() }
