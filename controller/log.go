package controller

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
)

type reconcileIDKey struct{}

// LoggerFrom returns the logger of the reconcile running with ctx, carrying
// the controller name, the request's namespace and name and the reconcile
// ID; outside a reconcile it returns ctx's logger, or a discarding one.
func LoggerFrom(ctx context.Context) logr.Logger {
	return logr.FromContextOrDiscard(ctx)
}

// ReconcileIDFrom returns the unique ID of the reconcile running with ctx,
// or "" outside a reconcile.
func ReconcileIDFrom(ctx context.Context) types.UID {
	id, _ := ctx.Value(reconcileIDKey{}).(types.UID)
	return id
}
