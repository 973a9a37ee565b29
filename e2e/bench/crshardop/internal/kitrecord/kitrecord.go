// Package kitrecord records the reconciles, the cache reads that found no
// object, and the ring events of a converted operator built for the test
// kit (-tags kshardtest), through crshard.Observe and the kit's recorder
// (internal/recorder), so the kit's checker can look for overlapping
// reconciles, lost or late updates and existing objects read as NotFound;
// and it serves the
// kit's cache report (kshardtest.ServeCacheReport), so a test can check
// that every object is cached by exactly one replica. The operators'
// kshardtest-tagged files install it; it is not part of a conversion.
package kitrecord

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kshard/kshard/controller/crshard"
	"github.com/kshard/kshard/internal/kitwriter"
	"github.com/kshard/kshard/internal/recorder"
	"github.com/kshard/kshard/manager/kshardtest"
	"github.com/kshard/kshard/shard"
)

// Install records every reconcile of the kit's ConfigMaps' keys, every
// cache read of a reconciled key that found no object, and every ring
// event, of this process's rings, with the recorder the kit's environment
// names; and serves the cache report on a port of loopback the kernel
// picks, for the life of the process (main knows nothing of it, so nothing
// could stop it earlier; the recorder file stays open as long).
func Install() error {
	rec, err := recorder.OpenFromEnv()
	if err != nil {
		return err
	}
	// The manager's cache, as the first reconcile passes it: crshard
	// shows it to an observer only there.
	var seen atomic.Pointer[client.Reader]
	go func() {
		err := kshardtest.ServeCacheReport(context.Background(), "127.0.0.1:0", func(ctx context.Context) ([]kshardtest.CachedObject, error) {
			c := seen.Load()
			if c == nil {
				return nil, errors.New("this replica has run no reconcile yet, so its cache was never passed to the observer: a replica that holds partitions with objects reconciles them on activation")
			}
			return cachedConfigMaps(ctx, *c)
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "(kshardtest build):", err)
		}
	}()
	crshard.Observe(&crshard.Observer{
		Ring: rec.Ring,
		Reconcile: func(ctx context.Context, cache client.Reader, req reconcile.Request, next reconcile.Func) (reconcile.Result, error) {
			if seen.Load() == nil {
				seen.Store(&cache)
			}
			start := time.Now()
			gen, ok, err := kitGen(ctx, cache, req)
			if apierrors.IsNotFound(err) {
				// The kit's tests delete no object while replicas
				// run: the checker compares this read with the
				// object's creation (kshardtest.Report.NotFound).
				if err := rec.NotFound(shard.KeyOf(req.Namespace, req.Name), start); err != nil {
					return reconcile.Result{}, err
				}
				return next(ctx, req)
			}
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
// objects that are not the kit's, and the error a NotFound one when the
// cache holds no such ConfigMap.
func kitGen(ctx context.Context, cache client.Reader, req reconcile.Request) (int64, bool, error) {
	var cm corev1.ConfigMap
	if err := cache.Get(ctx, req.NamespacedName, &cm); err != nil {
		return 0, false, err
	}
	if cm.Labels[kitwriter.Label] != kitwriter.LabelValue {
		return 0, false, nil
	}
	gen, err := strconv.ParseInt(cm.Data[kitwriter.GenKey], 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("ConfigMap %s: data[%q] = %q: %w", req.NamespacedName, kitwriter.GenKey, cm.Data[kitwriter.GenKey], err)
	}
	return gen, true, nil
}

// cachedConfigMaps lists the ConfigMaps the cache holds: with the ring's
// sharded cache, those of the partitions this replica holds.
func cachedConfigMaps(ctx context.Context, cache client.Reader) ([]kshardtest.CachedObject, error) {
	var list corev1.ConfigMapList
	if err := cache.List(ctx, &list); err != nil {
		return nil, err
	}
	out := make([]kshardtest.CachedObject, len(list.Items))
	for i, cm := range list.Items {
		out[i] = kshardtest.CachedObject{Key: shard.KeyOf(cm.Namespace, cm.Name), ResourceVersion: cm.ResourceVersion}
	}
	return out, nil
}
