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
	"k8s.io/apimachinery/pkg/types"
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
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name: objectName(i), Labels: map[string]string{labelKey: labelObject},
				Annotations: map[string]string{annObserved: "1/" + strconv.Itoa(b.epoch)},
			},
			Data: map[string]string{genKey: "1", "payload": "benchmark object " + strconv.Itoa(i)},
		}
		_, err := b.client.CoreV1().ConfigMaps(b.objectNamespace(i)).Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
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
	b.obs.expect(objectName(i), gen, at)
	_, err := b.client.CoreV1().ConfigMaps(b.objectNamespace(i)).Patch(ctx, objectName(i), types.MergePatchType, patch, metav1.PatchOptions{})
	return err
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
