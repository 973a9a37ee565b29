package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
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
	"github.com/kshard/kshard/shard/ringstatus"
)

// requestTimeout bounds each API request, so that an unreachable server
// fails the command instead of hanging it.
const requestTimeout = 15 * time.Second

// commandTimeout bounds a whole status or owner command.
const commandTimeout = 45 * time.Second

// cluster is a connection to the API server that the flags name, with the
// namespaces they resolve to.
type cluster struct {
	config *rest.Config
	client kubernetes.Interface
	// namespace is the objects' namespace: -n, else the context's.
	namespace string
	// leaseNamespace is the namespace of the ring's Leases:
	// --lease-namespace, else namespace. leaseNamespaceGiven says whether
	// --lease-namespace named it.
	leaseNamespace      string
	leaseNamespaceGiven bool
}

// newCluster is a cluster for client, with the namespaces the flags g
// resolve to given ns, the namespace -n or the context names.
func newCluster(cfg *rest.Config, client kubernetes.Interface, ns string, g *globals) *cluster {
	c := &cluster{config: cfg, client: client, namespace: ns, leaseNamespace: ns}
	if g.leaseNamespace != "" {
		c.leaseNamespace, c.leaseNamespaceGiven = g.leaseNamespace, true
	}
	return c
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
	return newCluster(cfg, client, ns, g), nil
}

// apiError rewords an API error as what to do about it.
func (c *cluster) apiError(what string, err error) error {
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s: forbidden for this user: it needs get and list on leases.coordination.k8s.io in namespace %q (check: kubectl auth can-i list leases -n %s)", what, c.leaseNamespace, c.leaseNamespace)
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

// ringSelector selects the Leases of ring, or of every ring when it is
// empty.
func ringSelector(ring string) string {
	if ring == "" {
		return lease.LabelRing
	}
	return lease.LabelRing + "=" + ring
}

// readRings lists the Leases of ring (every ring when empty) in the Leases'
// namespace and reads them. It fails with a hint when there is none.
func (c *cluster) readRings(ctx context.Context, ring string) ([]ringstatus.Ring, error) {
	if err := validRing(ring); err != nil {
		return nil, err
	}
	list, err := c.client.CoordinationV1().Leases(c.leaseNamespace).List(ctx, metav1.ListOptions{LabelSelector: ringSelector(ring)})
	if err != nil {
		return nil, c.apiError(fmt.Sprintf("listing Leases in namespace %q", c.leaseNamespace), err)
	}
	rings := ringstatus.Analyze(c.leaseNamespace, list.Items, time.Now())
	if len(rings) > 0 {
		return rings, nil
	}
	return nil, c.noRingError(ctx, ring)
}

// readAllRings lists the Leases of ring (every ring when empty) in every
// namespace and reads the rings of each namespace, sorted by namespace,
// then name: a ring is the Leases of one namespace with one ring label.
func (c *cluster) readAllRings(ctx context.Context, ring string) ([]ringstatus.Ring, error) {
	if err := validRing(ring); err != nil {
		return nil, err
	}
	list, err := c.client.CoordinationV1().Leases(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: ringSelector(ring)})
	switch {
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("listing Leases in every namespace (-A): forbidden for this user: it needs list on leases.coordination.k8s.io cluster-wide (check: kubectl auth can-i list leases -A); or give the Leases' namespace with --lease-namespace instead of -A")
	case err != nil:
		return nil, c.apiError("listing Leases in every namespace", err)
	}
	rings := analyzeByNamespace(list.Items, time.Now())
	if len(rings) > 0 {
		return rings, nil
	}
	if ring != "" {
		return nil, fmt.Errorf("ring %q has no Lease in any namespace (label %s=%s): is the operator running, and is --ring its ring's name?", ring, lease.LabelRing, ring)
	}
	return nil, fmt.Errorf("no kshard ring in any namespace (no Lease has label %s): is the operator running?", lease.LabelRing)
}

// analyzeByNamespace reads the rings of leases, which may come from many
// namespaces, namespace by namespace.
func analyzeByNamespace(leases []coordinationv1.Lease, now time.Time) []ringstatus.Ring {
	byNamespace := map[string][]coordinationv1.Lease{}
	for _, l := range leases {
		byNamespace[l.Namespace] = append(byNamespace[l.Namespace], l)
	}
	var rings []ringstatus.Ring
	for _, ns := range slices.Sorted(maps.Keys(byNamespace)) {
		rings = append(rings, ringstatus.Analyze(ns, byNamespace[ns], now)...)
	}
	return rings
}

// validRing checks a --ring value; empty is every ring.
func validRing(ring string) error {
	if ring == "" {
		return nil
	}
	if err := lease.ValidateRing(ring); err != nil {
		return usagef("not a valid ring name: --ring %v", err)
	}
	return nil
}

// findRing looks for ring (or, when empty, the only ring there is) in every
// namespace, for a command whose --lease-namespace was not given and whose
// default namespace holds none of it. It returns the one namespace that
// holds it, or "" when none or several do or the search is not allowed.
func (c *cluster) findRing(ctx context.Context, ring string) string {
	list, err := c.client.CoordinationV1().Leases(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: ringSelector(ring), Limit: 500})
	if err != nil {
		return ""
	}
	var where []string
	for _, r := range analyzeByNamespace(list.Items, time.Now()) {
		where = append(where, r.Namespace)
	}
	if len(where) != 1 {
		return "" // none, or several: rings of one name in two namespaces, or two rings
	}
	return where[0]
}

// noRingError explains a namespace without the ring: it does not exist, or
// the rings live elsewhere (found with a best-effort cluster-wide list), or
// there are none at all.
func (c *cluster) noRingError(ctx context.Context, ring string) error {
	ns := c.leaseNamespace
	what := fmt.Sprintf("no kshard ring in namespace %q (no Lease has label %s)", ns, lease.LabelRing)
	if ring != "" {
		what = fmt.Sprintf("ring %q has no Lease in namespace %q (label %s=%s)", ring, ns, lease.LabelRing, ring)
		// Other rings in this namespace are the likely intent.
		if list, err := c.client.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{LabelSelector: lease.LabelRing}); err == nil {
			if names := ringNames(list.Items, false); len(names) > 0 {
				return fmt.Errorf("%s; rings here: %s: pass one with --ring", what, strings.Join(names, ", "))
			}
		}
	}
	if _, err := c.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return fmt.Errorf("namespace %q does not exist: pass --lease-namespace with the namespace of the operator's Leases", ns)
	}
	if list, err := c.client.CoordinationV1().Leases(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: ringSelector(ring), Limit: 500}); err == nil {
		if found := ringNames(list.Items, true); len(found) > 0 {
			return fmt.Errorf("%s; found: %s: pass --lease-namespace with one of those namespaces", what, strings.Join(found, ", "))
		}
	}
	return fmt.Errorf("%s: pass --lease-namespace with the namespace of the operator's Leases (kubectl get leases -A -l %s lists them); is the operator running?", what, lease.LabelRing)
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
