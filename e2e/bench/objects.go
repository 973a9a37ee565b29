package main

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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The object contract shared with the two operators (each keeps a copy).
const (
	labelKey      = "kshard-bench"
	labelObject   = "obj"
	labelEpoch    = "epoch"
	epochName     = "bench-epoch"
	genKey        = "gen"
	epochKey      = "epoch"
	annObserved   = "bench.kshard.io/observed"
	annReconciler = "bench.kshard.io/by"
)

func objectName(i int) string { return fmt.Sprintf("obj-%05d", i) }

// objectKind is the kind of the benchmark objects: ConfigMaps, or
// BenchObjects (bench.kshard.io/v1, benchobject-crd.yaml), a custom
// resource of the same shape (metadata and a data map), so that both are
// written with the same patches and reconciled with the same code.
type objectKind struct {
	// Name is the kind, as the operators' --kind takes it.
	Name string
	GVR  schema.GroupVersionResource
}

var (
	configMaps   = objectKind{"ConfigMap", schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}
	benchObjects = objectKind{"BenchObject", schema.GroupVersionResource{Group: "bench.kshard.io", Version: "v1", Resource: "benchobjects"}}
)

// metricLabel is the kind as kshard's metrics label it (kshard_cache_mode's
// "kind": the GroupVersionKind's String()).
func (k objectKind) metricLabel() string {
	return schema.GroupVersionKind{Group: k.GVR.Group, Version: k.GVR.Version, Kind: k.Name}.String()
}

// objectClient creates and patches the benchmark objects of one kind:
// ConfigMaps through the typed clientset (as every phase before custom
// resources did), BenchObjects through the dynamic client.
type objectClient struct {
	kind  objectKind
	typed kubernetes.Interface
	dyn   dynamic.Interface
}

// newObjectClient returns an objectClient of kind on cfg.
func newObjectClient(cfg *rest.Config, kind objectKind) (objectClient, error) {
	c := objectClient{kind: kind}
	var err error
	if kind == configMaps {
		c.typed, err = kubernetes.NewForConfig(cfg)
	} else {
		c.dyn, err = dynamic.NewForConfig(cfg)
	}
	return c, err
}

// create creates the benchmark object ns/name (labelled as one) with
// annotations and data; one that exists already is left as it is.
func (c objectClient) create(ctx context.Context, ns, name string, annotations, data map[string]string) error {
	meta := metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{labelKey: labelObject}, Annotations: annotations}
	var err error
	if c.typed != nil {
		_, err = c.typed.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta, Data: data}, metav1.CreateOptions{})
	} else {
		obj := &unstructured.Unstructured{Object: map[string]any{"data": stringMap(data)}}
		obj.SetAPIVersion(c.kind.GVR.GroupVersion().String())
		obj.SetKind(c.kind.Name)
		obj.SetName(name)
		obj.SetLabels(meta.Labels)
		obj.SetAnnotations(annotations)
		_, err = c.dyn.Resource(c.kind.GVR).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
	}
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// patch sends a JSON merge patch of the object ns/name.
func (c objectClient) patch(ctx context.Context, ns, name string, body []byte) error {
	if c.typed != nil {
		_, err := c.typed.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
		return err
	}
	_, err := c.dyn.Resource(c.kind.GVR).Namespace(ns).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
	return err
}

// delete deletes the object ns/name; one already gone is no error.
func (c objectClient) delete(ctx context.Context, ns, name string) error {
	var err error
	if c.typed != nil {
		err = c.typed.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{})
	} else {
		err = c.dyn.Resource(c.kind.GVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// stringMap is m as unstructured content holds it.
func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// objectKey is object i's key, "namespace/name", by which the observer
// knows it.
func (b *bench) objectKey(i int) string { return b.objectNamespace(i) + "/" + objectName(i) }

// objectNamespace is the namespace of object i (see bench.spread).
func (b *bench) objectNamespace(i int) string {
	if b.spread == 0 {
		return b.ns
	}
	return shardedNamespace(i % b.spread)
}

// epochNamespaces are the namespaces whose epoch ConfigMaps the operators
// read: b.ns's alone, or with objects spread (and no shared epoch), each
// object namespace's.
func (b *bench) epochNamespaces() []string {
	return b.epochLayout(b.sharedEpoch)
}

// epochLayout is epochNamespaces for one layout.
func (b *bench) epochLayout(shared bool) []string {
	if b.spread == 0 || shared {
		return []string{b.ns}
	}
	out := make([]string, b.spread)
	for k := range out {
		out[k] = shardedNamespace(k)
	}
	return out
}

// ensureObjects creates objects up to n (with the current epoch already
// recorded, so a fresh operator's initial pass finds nothing to do) and the
// epoch ConfigMaps.
func (b *bench) ensureObjects(ctx context.Context, n int) error {
	if b.epoch == 0 {
		b.epoch = 1
		namespaces := b.epochLayout(false)
		if b.spread > 0 {
			namespaces = append(namespaces, b.ns) // phase 8's shared epoch
		}
		err := parallel(ctx, 32, len(namespaces), func(ctx context.Context, k int) error {
			ep := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: epochName, Labels: map[string]string{labelKey: labelEpoch}},
				Data:       map[string]string{epochKey: "1"},
			}
			_, err := b.client.CoreV1().ConfigMaps(namespaces[k]).Create(ctx, ep, metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("creating the epoch ConfigMaps: %w", err)
		}
		b.epochWritten = map[bool]int{false: 1, true: 1}
	}
	from := len(b.gens)
	for len(b.gens) < n {
		b.gens = append(b.gens, 1)
	}
	return parallel(ctx, 32, n-from, func(ctx context.Context, k int) error {
		i := from + k
		return b.objs.create(ctx, b.objectNamespace(i), objectName(i),
			map[string]string{annObserved: "1/" + strconv.Itoa(b.epoch)},
			map[string]string{genKey: "1", "payload": "benchmark object " + strconv.Itoa(i)})
	})
}

// shrinkObjects deletes the objects from n on (those ensureObjects created
// last) and waits until b's observer, and each of others that watches them
// too, has seen them go: the throughput rounds run on more objects than
// the phases after them (params.ThroughputObjects), which keep their
// counts. No fleet may run meanwhile.
func (b *bench) shrinkObjects(ctx context.Context, n int, others ...*observer) error {
	if n >= len(b.gens) {
		return nil
	}
	progress("deleting objects %d to %d: the phases after the throughput rounds run on %d", n, len(b.gens)-1, n)
	gone := make([]string, 0, len(b.gens)-n)
	for i := n; i < len(b.gens); i++ {
		gone = append(gone, b.objectKey(i))
	}
	err := parallel(ctx, 32, len(gone), func(ctx context.Context, k int) error {
		return b.objs.delete(ctx, b.objectNamespace(n+k), objectName(n+k))
	})
	if err != nil {
		return fmt.Errorf("deleting the objects beyond %d: %w", n, err)
	}
	b.gens = b.gens[:n]
	wctx, cancel := context.WithTimeout(ctx, b.p.ReadyTimeout)
	defer cancel()
	for _, o := range append([]*observer{b.obs}, others...) {
		if err := o.wait(wctx, func() bool { return !o.holdsAny(gone) }); err != nil {
			return fmt.Errorf("the harness's watch did not see the %d objects beyond %d deleted: %w", len(gone), n, err)
		}
	}
	return nil
}

// useEpochs makes the operators started next read one shared epoch
// ConfigMap (in b.ns) or, with objects spread, one per namespace, first
// bringing that layout's ConfigMaps to the current epoch if the other
// layout's bumps left them behind.
func (b *bench) useEpochs(ctx context.Context, shared bool) error {
	b.sharedEpoch = shared
	if b.epochWritten[shared] == b.epoch {
		return nil
	}
	if err := b.writeEpoch(ctx); err != nil {
		return fmt.Errorf("bringing the epoch ConfigMaps to epoch %d: %w", b.epoch, err)
	}
	return nil
}

// writeEpoch writes the current epoch into the epoch ConfigMaps the
// operators read (one write per namespace, 32 at a time).
func (b *bench) writeEpoch(ctx context.Context) error {
	patch, _ := json.Marshal(map[string]any{"data": map[string]string{epochKey: strconv.Itoa(b.epoch)}})
	namespaces := b.epochNamespaces()
	err := parallel(ctx, 32, len(namespaces), func(ctx context.Context, k int) error {
		_, err := b.client.CoreV1().ConfigMaps(namespaces[k]).Patch(ctx, epochName, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err == nil {
		if b.epochWritten == nil {
			b.epochWritten = map[bool]int{}
		}
		b.epochWritten[b.sharedEpoch] = b.epoch
	}
	return err
}

// bumpEpoch starts a new epoch: every object needs a reconcile. It returns
// the new epoch and when the first write was sent (with objects spread,
// one write per namespace, 32 at a time).
func (b *bench) bumpEpoch(ctx context.Context) (int, time.Time, error) {
	b.epoch++
	at := time.Now()
	return b.epoch, at, b.writeEpoch(ctx)
}

// bumpGen writes a new generation into object i and registers it with the
// observer, which times it until its reconcile is seen.
func (b *bench) bumpGen(ctx context.Context, i int) error {
	b.gens[i]++
	gen := b.gens[i]
	patch, _ := json.Marshal(map[string]any{"data": map[string]string{genKey: strconv.Itoa(gen)}})
	at := time.Now()
	b.obs.expect(b.objectKey(i), gen, at)
	return b.objs.patch(ctx, b.objectNamespace(i), objectName(i), patch)
}

// parallel runs f for 0..n-1 on up to workers goroutines, stopping at the
// first error, and waits for all of them.
func parallel(ctx context.Context, workers, n int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range min(workers, max(n, 1)) {
		wg.Go(func() {
			for i := range next {
				if err := f(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}
