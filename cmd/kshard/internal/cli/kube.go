package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/manager/ringstatus"
)

// requestTimeout bounds each API request, so that an unreachable server
// fails the command instead of hanging it.
const requestTimeout = 15 * time.Second

// commandTimeout bounds a whole status or owner command.
const commandTimeout = 45 * time.Second

// cluster is a connection to the API server that the flags name.
type cluster struct {
	config    *rest.Config
	client    kubernetes.Interface
	namespace string
}

// connect loads the kubeconfig as kubectl does: --kubeconfig, $KUBECONFIG,
// ~/.kube/config, then the in-cluster service account.
func connect(g *globals) (*cluster, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if g.kubeconfig != "" {
		if _, err := os.Stat(g.kubeconfig); err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: cannot read it (%v); pass the path of a kubeconfig file", g.kubeconfig, errors.Unwrap(err))
		}
		rules.ExplicitPath = g.kubeconfig
	}
	overrides := g.overrides // the flags kubectl has, applied as kubectl does
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &overrides)
	cfg, err := cc.ClientConfig()
	switch {
	case clientcmd.IsEmptyConfig(err):
		return nil, errors.New("no kubeconfig found ($KUBECONFIG and ~/.kube/config are empty) and not running in a cluster: pass --kubeconfig")
	case err != nil:
		return nil, fmt.Errorf("loading kubeconfig: %v; check --kubeconfig and --context", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("reading the namespace from the kubeconfig: %v; pass -n", err)
	}
	cfg = rest.CopyConfig(cfg)
	if overrides.Timeout == "" || overrides.Timeout == "0" {
		cfg.Timeout = requestTimeout
	}
	cfg.UserAgent = "kshard-cli"
	// Deprecation warnings would break the one-table output; nothing the
	// CLI reads is deprecated.
	cfg.WarningHandler = rest.NoWarnings{}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a client for %s: %v; check the kubeconfig", cfg.Host, err)
	}
	return &cluster{config: cfg, client: client, namespace: ns}, nil
}

// apiError rewords an API error as what to do about it.
func (c *cluster) apiError(what string, err error) error {
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s: forbidden for this user: it needs get and list on leases.coordination.k8s.io in namespace %q (check: kubectl auth can-i list leases -n %s)", what, c.namespace, c.namespace)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%s: the API server at %s rejected the credentials: refresh them or pick another --context", what, c.config.Host)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: the API server at %s did not answer in time: check that the cluster is up and --kubeconfig/--context point at it", what, c.config.Host)
	case !isAPIStatus(err):
		return fmt.Errorf("%s: cannot reach the API server at %s (%v): check that the cluster is up and --kubeconfig/--context point at it", what, c.config.Host, err)
	default:
		return fmt.Errorf("%s: %v", what, err)
	}
}

// readRings lists the Leases of ring (every ring when empty) in the
// namespace and reads them. It fails with a hint when there is none.
func (c *cluster) readRings(ctx context.Context, ring string) ([]ringstatus.Ring, error) {
	if ring != "" {
		if err := lease.ValidateRing(ring); err != nil {
			return nil, usagef("not a valid ring name: --ring %v", err)
		}
	}
	selector := lease.LabelRing
	if ring != "" {
		selector += "=" + ring
	}
	list, err := c.client.CoordinationV1().Leases(c.namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, c.apiError(fmt.Sprintf("listing Leases in namespace %q", c.namespace), err)
	}
	rings := ringstatus.Analyze(c.namespace, list.Items, time.Now())
	if len(rings) > 0 {
		return rings, nil
	}
	return nil, c.noRingError(ctx, ring)
}

// noRingError explains an empty namespace: it does not exist, or the rings
// live elsewhere (found with a best-effort cluster-wide list), or there are
// none at all.
func (c *cluster) noRingError(ctx context.Context, ring string) error {
	what := fmt.Sprintf("no kshard ring in namespace %q (no Lease has label %s)", c.namespace, lease.LabelRing)
	if ring != "" {
		what = fmt.Sprintf("ring %q has no Lease in namespace %q (label %s=%s)", ring, c.namespace, lease.LabelRing, ring)
		// Other rings in this namespace are the likely intent.
		if list, err := c.client.CoordinationV1().Leases(c.namespace).List(ctx, metav1.ListOptions{LabelSelector: lease.LabelRing}); err == nil {
			if names := ringNames(list.Items, false); len(names) > 0 {
				return fmt.Errorf("%s; rings here: %s: pass one with --ring", what, strings.Join(names, ", "))
			}
		}
	}
	if _, err := c.client.CoreV1().Namespaces().Get(ctx, c.namespace, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return fmt.Errorf("namespace %q does not exist: pass -n with the namespace of the operator's Leases", c.namespace)
	}
	selector := lease.LabelRing
	if ring != "" {
		selector += "=" + ring
	}
	if list, err := c.client.CoordinationV1().Leases("").List(ctx, metav1.ListOptions{LabelSelector: selector, Limit: 500}); err == nil {
		if found := ringNames(list.Items, true); len(found) > 0 {
			return fmt.Errorf("%s; found: %s: pass -n with one of those namespaces", what, strings.Join(found, ", "))
		}
	}
	return fmt.Errorf("%s: pass -n with the namespace of the operator's Leases (kubectl get leases -A -l %s lists them); is the operator running?", what, lease.LabelRing)
}

// ringNames lists the distinct rings of leases, as "ring" or, withNamespace,
// "ring in namespace".
func ringNames(leases []coordinationv1.Lease, withNamespace bool) []string {
	var out []string
	for _, l := range leases {
		n := l.Labels[lease.LabelRing]
		if withNamespace {
			n = fmt.Sprintf("ring %s in namespace %s", n, l.Namespace)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// isAPIStatus reports whether err is an answer of the API server, as
// opposed to a failure to reach it.
func isAPIStatus(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status)
}
