package app

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kshard/kshard/cmd/example-operator/api/v1alpha1"
	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/shard/cache"
)

// widgetReconciler renders each Widget into a ConfigMap it owns and records
// in the Widget's status which generation it saw and which replica did it.
type widgetReconciler struct {
	cache    *cache.Cache
	client   kubernetes.Interface
	widgets  rest.Interface // REST client for demo.kshard.io/v1alpha1
	identity string
	// workDelay simulates a slow external call, for benchmarks and demos.
	workDelay time.Duration
}

// childName is the ConfigMap a Widget owns.
func childName(widget string) string { return "widget-" + widget }

func (r *widgetReconciler) Reconcile(ctx context.Context, req controller.Request) (controller.Result, error) {
	var w v1alpha1.Widget
	if err := r.cache.Get(ctx, req.NamespacedName, &w); err != nil {
		if apierrors.IsNotFound(err) {
			return controller.Result{}, nil // deleted: its ConfigMap goes with it (owner reference)
		}
		return controller.Result{}, err
	}
	if !w.DeletionTimestamp.IsZero() {
		return controller.Result{}, nil
	}
	if r.workDelay > 0 {
		select {
		case <-time.After(r.workDelay):
		case <-ctx.Done():
			return controller.Result{}, ctx.Err()
		}
	}
	if err := r.ensureChild(ctx, &w); err != nil {
		return controller.Result{}, err
	}
	if w.Status.ObservedGeneration == w.Generation && w.Status.ReconciledBy == r.identity && w.Status.ConfigMap == childName(w.Name) {
		return controller.Result{}, nil
	}
	status := v1alpha1.WidgetStatus{ObservedGeneration: w.Generation, ReconciledBy: r.identity, ConfigMap: childName(w.Name)}
	// The resourceVersion read is a precondition: the API server refuses
	// the patch (409 Conflict) if the Widget changed since. kshard refuses
	// writes once this replica's lease validity has passed, but a write
	// already on the wire when a pause begins can still land after a peer
	// took the key over; the precondition makes such a stale write fail
	// instead of overwriting the peer's newer status.
	patch, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": w.ResourceVersion},
		"status":   status,
	})
	err := r.widgets.Patch(types.MergePatchType).Namespace(w.Namespace).Resource("widgets").Name(w.Name).
		SubResource("status").Body(patch).Do(ctx).Error()
	switch {
	case apierrors.IsNotFound(err):
		return controller.Result{}, nil
	case apierrors.IsConflict(err):
		// Changed meanwhile. The change's event may not reconcile it
		// again: the controller admits generation changes only, and a
		// label or status change (the sharded cache's partition label,
		// say) bumps the resourceVersion without one. Read it again.
		return controller.Result{Requeue: true}, nil
	}
	// Any other error is retried, including controller.ErrLeaseExpired:
	// the patch was refused before sending because this replica's lease
	// validity passed (a pause, failed renewals). Its partitions are being
	// revoked, so the retry is dropped here and the new owner reconciles.
	return controller.Result{}, err
}

func (r *widgetReconciler) ensureChild(ctx context.Context, w *v1alpha1.Widget) error {
	want := map[string]string{"color": w.Spec.Color, "size": strconv.Itoa(int(w.Spec.Size)), "generation": strconv.FormatInt(w.Generation, 10)}
	var cm corev1.ConfigMap
	err := r.cache.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: childName(w.Name)}, &cm)
	switch {
	case apierrors.IsNotFound(err):
		controllerRef := true
		child := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name: childName(w.Name), Namespace: w.Namespace,
				Labels: map[string]string{"demo.kshard.io/widget": w.Name},
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: v1alpha1.GroupVersion.String(), Kind: "Widget", Name: w.Name, UID: w.UID,
					Controller: &controllerRef, BlockOwnerDeletion: &controllerRef,
				}},
			},
			Data: want,
		}
		_, err = r.client.CoreV1().ConfigMaps(w.Namespace).Create(ctx, child, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil // the cache lags our own earlier create; the next event reconciles again
		}
		return err
	case err != nil:
		return err
	}
	if equalData(cm.Data, want) {
		return nil
	}
	cm.Data = want
	// An Update of the object read carries its resourceVersion, so a stale
	// write is refused with a conflict rather than applied.
	_, err = r.client.CoreV1().ConfigMaps(w.Namespace).Update(ctx, &cm, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return fmt.Errorf("child ConfigMap changed meanwhile, retrying: %w", err)
	}
	return err
}

func equalData(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
