// Package kitrecord records the reconciles and ring events of a converted
// operator built for the test kit (-tags kshardtest), through
// crshard.Observe and manager/kshardtest's recorder, so the kit's checker
// can look for overlapping reconciles and lost updates. The operators'
// kshardtest-tagged files install it; it is not part of a conversion.
package kitrecord

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kshard/kshard/controller/crshard"
	"github.com/kshard/kshard/manager/kshardtest"
	"github.com/kshard/kshard/shard"
)

// Install records every reconcile of the kit's ConfigMaps' keys, and every
// ring event, of this process's rings, with the recorder the kit's
// environment names.
func Install() error {
	r, err := kshardtest.ReplicaFromEnv()
	if err != nil {
		return err
	}
	rec := r.Recorder
	crshard.Observe(&crshard.Observer{
		Ring: rec.Ring,
		Reconcile: func(ctx context.Context, cache client.Reader, req reconcile.Request, next reconcile.Func) (reconcile.Result, error) {
			start := time.Now()
			gen, ok, err := kitGen(ctx, cache, req)
			if err != nil {
				return reconcile.Result{}, err
			}
			if !ok {
				return next(ctx, req)
			}
			rc, err := rec.Started(shard.KeyOf(req.Namespace, req.Name), gen, start)
			if err != nil {
				return reconcile.Result{}, err
			}
			res, failure := next(ctx, req)
			// Ended early without saying so counts as unfinished, as
			// kshardtest.RecordReconciles records it.
			unfinished := failure
			if unfinished == nil {
				unfinished = ctx.Err()
			}
			if err := rec.Ended(rc, unfinished); err != nil && failure == nil {
				return res, err
			}
			return res, failure
		},
	})
	return nil
}

// kitGen reads the generation the kit's writer wrote into the ConfigMap,
// from the manager's cache as the reconcile sees it; ok is false for
// objects that are not the kit's.
func kitGen(ctx context.Context, cache client.Reader, req reconcile.Request) (int64, bool, error) {
	var cm corev1.ConfigMap
	if err := cache.Get(ctx, req.NamespacedName, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, false, nil
		}
		return 0, false, err
	}
	if cm.Labels[kshardtest.Label] != kshardtest.LabelValue {
		return 0, false, nil
	}
	gen, err := strconv.ParseInt(cm.Data[kshardtest.GenKey], 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("ConfigMap %s: data[%q] = %q: %w", req.NamespacedName, kshardtest.GenKey, cm.Data[kshardtest.GenKey], err)
	}
	return gen, true, nil
}
