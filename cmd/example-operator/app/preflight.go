package app

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/kshard/kshard/cmd/example-operator/api/v1alpha1"
)

// Retry timing of preflight while the API server does not answer.
const (
	firstRetry   = 500 * time.Millisecond
	maxRetry     = 16 * time.Second
	attemptLimit = 10 * time.Second // one discovery request
	servedPoll   = 200 * time.Millisecond
)

// preflight returns once the API server answers and serves Widgets, so that
// what a user can get wrong before the operator can work fails at once with
// one line saying what to do, instead of as retries deep in the informers:
//
//   - an unreachable API server is retried with capped exponential backoff,
//     each attempt logged, for at most --api-server-wait (0: forever);
//   - refused credentials fail at once: retrying cannot fix them;
//   - a missing Widget CRD fails at once, or with --install-crd is created
//     and waited for until it is served.
//
// It returns errStopped when ctx ends first.
func preflight(ctx context.Context, cfg *rest.Config, c *config, log logr.Logger) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building a discovery client: %w", err)
	}
	waitCtx := ctx
	if c.apiServerWait > 0 {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeout(ctx, c.apiServerWait)
		defer cancel()
	}
	gv := v1alpha1.GroupVersion
	var lastErr error
	delay, created := firstRetry, false
	for attempt := 1; ; attempt++ {
		served, err := servesWidgets(waitCtx, dc)
		var wait time.Duration
		switch {
		case err == nil && served:
			if attempt > 1 {
				log.Info("API server reachable and serving Widgets", "host", cfg.Host, "attempts", attempt)
			}
			return nil
		case err == nil && !c.installCRD:
			return fmt.Errorf("the API server at %s does not serve widgets.%s/%s: install the Widget CRD with `kubectl apply -f deploy/crd.yaml`, or start with --install-crd", cfg.Host, gv.Group, gv.Version)
		case err == nil && !created:
			if err := installCRD(waitCtx, cfg); err != nil {
				if waitCtx.Err() == nil {
					return err
				}
			} else {
				created = true
				log.Info("created the Widget CustomResourceDefinition (--install-crd); waiting until it is served", "host", cfg.Host)
			}
			wait = servedPoll
		case err == nil: // created, not served yet
			wait = servedPoll
		case apierrors.IsUnauthorized(err):
			return fmt.Errorf("the API server at %s refused the credentials (401 Unauthorized): check the kubeconfig's user, or the service account token in a cluster", cfg.Host)
		case apierrors.IsForbidden(err):
			return fmt.Errorf("the API server at %s forbids discovering %s: %v: grant the operator's identity discovery access (system:discovery)", cfg.Host, gv, err)
		default: // unreachable, timed out, or answering 5xx while starting
			if waitCtx.Err() == nil || lastErr == nil {
				lastErr = err
			}
			wait = delay
			delay = min(2*delay, maxRetry)
			if waitCtx.Err() == nil {
				log.Error(err, "API server unreachable; check the kubeconfig's server address or in-cluster networking. Retrying", "host", cfg.Host, "attempt", attempt, "retryIn", wait)
			}
		}
		select {
		case <-waitCtx.Done():
		case <-time.After(wait):
			continue
		}
		if ctx.Err() != nil {
			return errStopped
		}
		if lastErr == nil { // the CRD was created but never became served
			return fmt.Errorf("the Widget CRD was created but the API server at %s did not serve it within --api-server-wait %s: check `kubectl get crd widgets.%s`", cfg.Host, c.apiServerWait, gv.Group)
		}
		return fmt.Errorf("the API server at %s did not answer within --api-server-wait %s (%v): check the kubeconfig's server address and that the cluster is up, or raise --api-server-wait (0 retries forever)", cfg.Host, c.apiServerWait, lastErr)
	}
}

// servesWidgets asks discovery whether the API server serves Widgets. An
// error means no answer (or an error status); a 404 for the group version
// means not served.
func servesWidgets(ctx context.Context, dc *discovery.DiscoveryClient) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, attemptLimit)
	defer cancel()
	gv := v1alpha1.GroupVersion
	raw, err := dc.RESTClient().Get().AbsPath("/apis", gv.Group, gv.Version).Do(ctx).Raw()
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(raw, &list); err != nil {
		return false, fmt.Errorf("decoding the discovery document of %s: %w", gv, err)
	}
	for _, r := range list.APIResources {
		if r.Name == "widgets" {
			return true, nil
		}
	}
	return false, nil
}
