package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kshard/kshard/manager/kshardtest/recorder"
	"github.com/kshard/kshard/shard"
)

// The label the test operator reconciles, and the data key it reports
// (mirrors of e2e/testoperator's constants, which a main package cannot
// export).
const (
	labelKey = "kshard-e2e"
	genKey   = "gen"
)

// CreateConfigMaps creates n labelled ConfigMaps cm-0000… at generation 1
// (recorded as writes) and returns their names.
func (h *Harness) CreateConfigMaps(n int) []string {
	h.t.Helper()
	rec, err := recorder.OpenNamed(h.RecordDir(), "create")
	if err != nil {
		h.t.Fatal(err)
	}
	defer rec.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("cm-%04d", i)
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: names[i], Namespace: h.opts.Namespace, Labels: map[string]string{labelKey: "1"}},
			Data:       map[string]string{genKey: "1"},
		}
		sent := time.Now()
		if _, err := h.client.CoreV1().ConfigMaps(h.opts.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			h.t.Fatalf("creating ConfigMap %s: %v", names[i], err)
		}
		if err := rec.Append(recorder.Record{Kind: recorder.KindWrite, Key: shard.KeyOf(h.opts.Namespace, names[i]), Gen: 1, Start: sent.UnixNano(), At: time.Now().UnixNano()}); err != nil {
			h.t.Fatal(err)
		}
	}
	return names
}

// Writer keeps bumping data["gen"] of a set of ConfigMaps, round robin, and
// records every acknowledged update.
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

// StartWriter starts updating names (ConfigMaps from CreateConfigMaps) at
// about rate updates per second until Stop, which the test's cleanup also
// calls.
func (h *Harness) StartWriter(names []string, rate float64) *Writer {
	h.t.Helper()
	rec, err := recorder.OpenNamed(h.RecordDir(), "writer")
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Writer{
		client: h.client, namespace: h.opts.Namespace, names: names,
		interval: time.Duration(float64(time.Second) / rate), rec: rec,
		cancel: cancel, done: make(chan struct{}),
	}
	go w.run(ctx)
	h.t.Cleanup(func() { w.Stop() })
	return w
}

// Stop stops the writer, waits for it, and returns how many updates were
// acknowledged and how many failed.
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

// bump writes name back with data["gen"] incremented, starting from the
// object its last update returned or, after a failure, from a fresh GET: a
// write whose outcome was unknown (a timeout) is then never undone.
func (w *Writer) bump(ctx context.Context, name string, latest map[string]*corev1.ConfigMap) error {
	cms := w.client.CoreV1().ConfigMaps(w.namespace)
	cm, ok := latest[name]
	delete(latest, name)
	if !ok {
		var err error
		if cm, err = cms.Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
	}
	gen, _ := strconv.ParseInt(cm.Data[genKey], 10, 64)
	gen++
	// A JSON patch that tests the generation it read: as safe as an
	// Update conditioned on the resourceVersion for the writer's own
	// field, but not refused when an operator wrote other fields
	// (annotations) meanwhile, as a blind-writing one does after each
	// reconcile.
	patch, err := json.Marshal([]map[string]string{
		{"op": "test", "path": "/data/" + genKey, "value": cm.Data[genKey]},
		{"op": "replace", "path": "/data/" + genKey, "value": strconv.FormatInt(gen, 10)},
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
	latest[name] = updated
	return w.rec.Append(recorder.Record{Kind: recorder.KindWrite, Key: shard.KeyOf(w.namespace, name), Gen: gen, Start: sent.UnixNano(), At: time.Now().UnixNano()})
}
