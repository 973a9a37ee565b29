package cache

import (
	"context"
	"errors"
	"net"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// Retry bounds for calls that fail because the API server is unreachable.
const (
	unreachableRetryFirst = 200 * time.Millisecond
	unreachableRetryMax   = 2 * time.Second
)

// patient wraps lw so that a list or watch failing because the API server
// is unreachable is retried here, at most unreachableRetryMax apart, instead
// of being returned to the reflector. The reflector's own backoff grows to
// 30-60 s during an outage, so after a 30 s outage a replica would see no
// event for up to a minute although its Lease, and so its ownership, had
// recovered within seconds. Other errors (forbidden, gone, not found) still
// reach the reflector, which reports and handles them.
func patient(clk clock.Clock, lw *toolscache.ListWatch) *toolscache.ListWatch {
	list, watchFn := lw.ListWithContextFunc, lw.WatchFuncWithContext
	return &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return retryUnreachable(ctx, clk, func() (runtime.Object, error) { return list(ctx, opts) })
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return retryUnreachable(ctx, clk, func() (watch.Interface, error) { return watchFn(ctx, opts) })
		},
	}
}

func retryUnreachable[T any](ctx context.Context, clk clock.Clock, call func() (T, error)) (T, error) {
	delay := unreachableRetryFirst
	for {
		v, err := call()
		if err == nil || !unreachable(err) || ctx.Err() != nil {
			return v, err
		}
		timer := clk.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return v, err
		case <-timer.C():
		}
		delay = min(2*delay, unreachableRetryMax)
	}
}

// unreachable reports whether err says the API server could not be reached
// or is not serving yet, as opposed to refusing the request.
func unreachable(err error) bool {
	var netErr net.Error
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		apierrors.IsServiceUnavailable(err) || (errors.As(err, &netErr) && netErr.Timeout())
}
