// Package kitwriter is the test kit's ConfigMap writer, shared by
// manager/kshardtest and kshard's own e2e harness, benchmarks and kubelet
// check: it creates the kit's ConfigMaps and keeps bumping a generation in
// them, recording every acknowledged update for the checker
// (internal/recorder), which compares them with the reconciles recorded.
package kitwriter

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kshard/kshard/internal/recorder"
	"github.com/kshard/kshard/shard"
)

// The kit's objects: ConfigMaps labelled Label=LabelValue whose
// data[GenKey] is the generation the writer last wrote.
const (
	Label      = "kshardtest.kshard.io/object"
	LabelValue = "1"
	GenKey     = "gen"
)

// CreateConfigMaps creates n ConfigMaps cm-0000… with labels in namespace
// at generation 1, records the creations as writes into recordDir (file
// "create") and returns their names.
func CreateConfigMaps(ctx context.Context, client kubernetes.Interface, namespace string, labels map[string]string, n int, recordDir string) ([]string, error) {
	return createConfigMaps(ctx, client, []string{namespace}, false, labels, n, recordDir)
}

// CreateConfigMapsAcross is CreateConfigMaps spreading the n ConfigMaps
// round robin over namespaces (which must exist), for rings that partition
// by namespace. It returns their keys "namespace/name", which Start
// takes in place of names.
func CreateConfigMapsAcross(ctx context.Context, client kubernetes.Interface, namespaces []string, labels map[string]string, n int, recordDir string) ([]string, error) {
	if len(namespaces) == 0 {
		return nil, fmt.Errorf("kitwriter: CreateConfigMapsAcross needs at least one namespace")
	}
	return createConfigMaps(ctx, client, namespaces, true, labels, n, recordDir)
}

func createConfigMaps(ctx context.Context, client kubernetes.Interface, namespaces []string, qualified bool, labels map[string]string, n int, recordDir string) ([]string, error) {
	rec, err := recorder.OpenNamed(recordDir, "create")
	if err != nil {
		return nil, err
	}
	defer rec.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	names := make([]string, n)
	for i := range names {
		namespace, name := namespaces[i%len(namespaces)], fmt.Sprintf("cm-%04d", i)
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
			Data:       map[string]string{GenKey: "1"},
		}
		sent := time.Now()
		if _, err := client.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating ConfigMap %s/%s: %w", namespace, name, err)
		}
		if err := rec.Append(recorder.Record{Kind: recorder.KindWrite, Key: shard.KeyOf(namespace, name), Gen: 1, Start: sent.UnixNano(), At: time.Now().UnixNano()}); err != nil {
			return nil, err
		}
		names[i] = name
		if qualified {
			names[i] = namespace + "/" + name
		}
	}
	return names, nil
}

// Writer keeps bumping data[GenKey] of a set of ConfigMaps, round robin,
// and records every acknowledged update.
type Writer struct {
	client    kubernetes.Interface
	namespace string
	names     []string
	interval  time.Duration
	rec       *recorder.Writer

	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex // guards the counters below
	writes   int
	failures int
	lastErr  error
}

// Start starts updating names (from CreateConfigMaps) in namespace
// at about rate updates per second until Stop, recording into recordDir
// (file "writer"). A name "ns/name" (from CreateConfigMapsAcross) names
// its own namespace.
func Start(client kubernetes.Interface, namespace string, names []string, rate float64, recordDir string) (*Writer, error) {
	if len(names) == 0 || rate <= 0 {
		return nil, fmt.Errorf("kitwriter: a writer needs objects and a positive rate (got %d objects, rate %v)", len(names), rate)
	}
	rec, err := recorder.OpenNamed(recordDir, "writer")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Writer{
		client: client, namespace: namespace, names: names,
		interval: time.Duration(float64(time.Second) / rate), rec: rec,
		cancel: cancel, done: make(chan struct{}),
	}
	go w.run(ctx)
	return w, nil
}

// Stop stops the writer, waits for it, and returns how many updates were
// acknowledged and how many failed. Calling it again returns the same.
func (w *Writer) Stop() (writes, failures int, lastErr error) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes, w.failures, w.lastErr
}

func (w *Writer) run(ctx context.Context) {
	defer close(w.done)
	defer w.rec.Close()
	// The object each last update returned; absent until read, and dropped
	// after a failure so the next bump reads the server's state again.
	latest := make(map[string]*corev1.ConfigMap, len(w.names))
	ticker := time.NewTicker(w.interval)
	defer ticker.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		name := w.names[i%len(w.names)]
		err := w.bump(ctx, name, latest)
		w.mu.Lock()
		if err == nil {
			w.writes++
		} else if ctx.Err() == nil {
			w.failures++
			w.lastErr = err
		}
		w.mu.Unlock()
	}
}

// bump writes name back with data[GenKey] incremented, starting from the
// object its last update returned or, after a failure, from a fresh GET: a
// write whose outcome was unknown (a timeout) is then never undone.
func (w *Writer) bump(ctx context.Context, entry string, latest map[string]*corev1.ConfigMap) error {
	namespace, name := w.namespace, entry
	if ns, n, ok := strings.Cut(entry, "/"); ok {
		namespace, name = ns, n
	}
	cms := w.client.CoreV1().ConfigMaps(namespace)
	cm, ok := latest[entry]
	delete(latest, entry)
	if !ok {
		var err error
		if cm, err = cms.Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
	}
	gen, _ := strconv.ParseInt(cm.Data[GenKey], 10, 64)
	gen++
	// A JSON patch that tests the generation it read: as safe as an
	// Update conditioned on the resourceVersion for the writer's own
	// field, but not refused when an operator wrote other fields
	// (annotations) meanwhile, as a blind-writing one does after each
	// reconcile.
	patch, err := json.Marshal([]map[string]string{
		{"op": "test", "path": "/data/" + GenKey, "value": cm.Data[GenKey]},
		{"op": "replace", "path": "/data/" + GenKey, "value": strconv.FormatInt(gen, 10)},
	})
	if err != nil {
		return err
	}
	sent := time.Now()
	updated, err := cms.Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{})
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsInvalid(err) {
			return fmt.Errorf("%s changed under the writer: %w", name, err)
		}
		return err
	}
	latest[entry] = updated
	return w.rec.Append(recorder.Record{Kind: recorder.KindWrite, Key: shard.KeyOf(namespace, name), Gen: gen, Start: sent.UnixNano(), At: time.Now().UnixNano()})
}
