package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kshard/kshard/controller"
)

// backgroundWriters is how many goroutines --background-write runs, so
// that several writes are ready to leave the moment a paused process
// resumes.
const backgroundWriters = 4

// backgroundName is the ConfigMap --background-write patches, one per
// identity; e2e/harness mirrors it.
func backgroundName(identity string) string { return "background-" + identity }

// backgroundWriter is --background-write, a test-only mode: it patches an
// annotation of the identity's own ConfigMap every interval from several
// goroutines, with context.Background() (no reconcile, so no lease validity
// of its own), as an operator's helper goroutine or a Runnable would. The
// e2e tests watch which of these writes land while the replica's own lease
// validity is lost.
type backgroundWriter struct {
	client    kubernetes.Interface
	namespace string
	name      string
	interval  time.Duration
	log       logr.Logger
}

// Start creates the ConfigMap (a setup write, sent before the replica is
// valid) and runs the writers until ctx ends.
func (b *backgroundWriter) Start(ctx context.Context) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: b.name, Namespace: b.namespace}}
	if _, err := b.client.CoreV1().ConfigMaps(b.namespace).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("--background-write: creating ConfigMap %s/%s: %w", b.namespace, b.name, err)
	}
	var wg sync.WaitGroup
	for i := range backgroundWriters {
		wg.Go(func() { b.write(ctx, i) })
	}
	wg.Wait()
	return nil
}

// backgroundBuilt is the annotation every background write sets to the
// time (Unix nanoseconds) it built its request, before the client's fence
// checked it: a test that pauses the process tells by it a write built
// before the pause (which may have passed the fence and been on its way)
// from one built after it.
const backgroundBuilt = "kshard-e2e/background-built"

// write patches annotation kshard-e2e/background-<i> with a new sequence
// number (a changed value, so every write that lands is an event) until ctx
// ends, logging when writes start and stop being refused.
func (b *backgroundWriter) write(ctx context.Context, i int) {
	key := "kshard-e2e/background-" + strconv.Itoa(i)
	refused := 0
	for seq := 1; ctx.Err() == nil; seq++ {
		annotations := map[string]string{key: strconv.Itoa(seq), backgroundBuilt: strconv.FormatInt(time.Now().UnixNano(), 10)}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
		_, err := b.client.CoreV1().ConfigMaps(b.namespace).Patch(context.Background(), b.name, types.MergePatchType, patch, metav1.PatchOptions{})
		switch {
		case errors.Is(err, controller.ErrLeaseExpired):
			if refused == 0 {
				b.log.Info("background writes refused", "writer", i, "error", err.Error())
			}
			refused++
		case refused > 0:
			b.log.Info("background writes no longer refused", "writer", i, "refused", refused, "error", fmt.Sprint(err))
			refused = 0
		}
		select {
		case <-ctx.Done():
		case <-time.After(b.interval):
		}
	}
}
