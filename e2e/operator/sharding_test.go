package operator_test

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kshard/kshard/internal/assign"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kshard/kshard/internal/process"
	"github.com/kshard/kshard/internal/testwait"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
	"github.com/kshard/kshard/shard"
	"github.com/kshard/kshard/shard/ringstatus"
)

const (
	ring          = "example-operator"
	leaseNS       = "kshard-system"
	widgetNS      = "widgets"
	replicas      = 3
	widgets       = 500
	updated       = 50 // Widgets whose spec changes once
	deleted       = 50 // Widgets deleted to exercise garbage collection
	childLabel    = "demo.kshard.io/widget"
	convergeLimit = 5 * time.Minute
)

// ringCfg is the replicas' ring configuration: the example operator's
// defaults (271 partitions, load 1.05). The test checks it against the
// fingerprint every Lease publishes.
var ringCfg = shard.Config{Partitions: shard.DefaultPartitions, Load: shard.DefaultLoad}.WithDefaults()

func widgetName(i int) string { return fmt.Sprintf("widget-%04d", i) }

// TestWidgetsShardedAcrossReplicas runs three replicas of the real binary,
// reconciles 500 Widgets (and an update of some), checks each was reconciled
// by its owner under the ring computed from the live Leases, that the load
// is within the ring's bound, that every Widget owns its ConfigMap and the
// garbage collector removes it with the Widget, and that replicas leave
// cleanly on SIGTERM.
func TestWidgetsShardedAcrossReplicas(t *testing.T) {
	skipIfShort(t)
	cp := controlplane.ForTest(t, controlplane.Options{})
	cfg := cp.Config()
	client := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	ctx := context.Background()

	installCRD(t, dyn)
	// The garbage collector starts after the CRD is served, so it knows
	// Widgets from the start rather than after its 30s rediscovery.
	if err := cp.StartControllerManager(ctx); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{leaseNS, widgetNS} {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// Replicas as a StatefulSet runs them: identity and Lease namespace from
	// the downward API's environment, ports chosen by the kernel.
	ops := make([]*operator, replicas)
	start := time.Now()
	for i := range ops {
		id := fmt.Sprintf("example-%d", i)
		ops[i] = startOperator(t, id, []string{"POD_NAME=" + id, "POD_NAMESPACE=" + leaseNS},
			"--kubeconfig", cp.KubeconfigPath(), "--ring", ring,
			"--metrics-bind-address", "127.0.0.1:0", "--metrics-secure=false", "--health-probe-bind-address", "127.0.0.1:0")
	}
	var r *assign.Ring
	testwait.NoError(t, 250*time.Millisecond, convergeLimit, "ring of 3 converged", func() error {
		var err error
		r, err = convergedRing(ctx, client, replicas)
		return err
	})
	t.Logf("ring of %d formed in %s: %s", replicas, time.Since(start).Round(time.Millisecond), claimSummary(r))

	// 500 Widgets, all reconciled.
	start = time.Now()
	createWidgets(t, dyn, widgets)
	created := time.Since(start)
	awaitAllReconciled(t, dyn, widgets)
	converge := time.Since(start)
	t.Logf("%d Widgets created in %s, all reconciled (observedGeneration == generation) %s after the first create", widgets, created.Round(time.Millisecond), converge.Round(time.Millisecond))
	checkChildren(t, ctx, client, dyn, widgets)

	// Update a sample once: generation 2 must be observed too.
	start = time.Now()
	for i := 0; i < widgets; i += widgets / updated {
		patch := []byte(`{"spec":{"color":"violet"}}`)
		if _, err := dyn.Resource(widgetGVR).Namespace(widgetNS).Patch(ctx, widgetName(i), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	objs := awaitAllReconciled(t, dyn, widgets)
	t.Logf("%d updated Widgets reconciled again in %s", updated, time.Since(start).Round(time.Millisecond))
	gen2 := 0
	for _, w := range objs {
		if w.GetGeneration() == 2 {
			gen2++
		}
	}
	if gen2 != updated {
		t.Errorf("%d Widgets are at generation 2, want the %d updated", gen2, updated)
	}
	checkChildren(t, ctx, client, dyn, widgets)

	// Every Widget was reconciled by its owner under the live ring, which
	// has not changed since it converged.
	if now, err := convergedRing(ctx, client, replicas); err != nil {
		t.Fatalf("the ring changed during the test: %v", err)
	} else if now.Fingerprint() != r.Fingerprint() {
		t.Fatalf("the ring changed during the test: %s, then %s", claimSummary(r), claimSummary(now))
	}
	checkOwnersAndBalance(t, r, objs)
	for _, o := range ops {
		addr := o.serverAddr(t, process.ServerMetrics)
		if addr == "" {
			continue
		}
		total, errs, err := reconcileTotals(addr)
		if err != nil {
			t.Errorf("scraping %s: %v", o.identity, err)
			continue
		}
		t.Logf("%s: %d reconciles (%d errors) by controller_runtime_reconcile_total", o.identity, total, errs)
	}

	// Deleting Widgets deletes their ConfigMaps through the garbage
	// collector, following the controller owner references. The CRD was
	// installed after kube-controller-manager started: until the collector's
	// next discovery resync (every 30s) it cannot resolve the Widget kind and
	// retries its owner checks of the children created meanwhile with
	// exponential backoff, so here collection takes about a minute (a few
	// seconds once the collector knows Widgets): the wait is long.
	start = time.Now()
	gone := map[string]bool{}
	for i := widgets / deleted / 2; i < widgets; i += widgets / deleted {
		name := widgetName(i)
		if err := dyn.Resource(widgetGVR).Namespace(widgetNS).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		gone[name] = true
	}
	if len(gone) != deleted {
		t.Fatalf("deleted %d Widgets, meant %d", len(gone), deleted)
	}
	testwait.NoError(t, time.Second, convergeLimit, "ConfigMaps of deleted Widgets garbage-collected", func() error {
		cms, err := client.CoreV1().ConfigMaps(widgetNS).List(ctx, metav1.ListOptions{LabelSelector: childLabel})
		if err != nil {
			return err
		}
		left := 0
		for _, cm := range cms.Items {
			if gone[cm.Labels[childLabel]] {
				left++
			}
		}
		if left > 0 {
			return fmt.Errorf("%d of %d ConfigMaps left", left, deleted)
		}
		if len(cms.Items) != widgets-deleted {
			return fmt.Errorf("%d ConfigMaps remain, want %d", len(cms.Items), widgets-deleted)
		}
		return nil
	})
	t.Logf("%d ConfigMaps garbage-collected %s after their Widgets were deleted", deleted, time.Since(start).Round(time.Millisecond))
	checkChildren(t, ctx, client, dyn, widgets-deleted)

	// SIGTERM: each replica leaves the ring, exits 0, and its Lease is gone
	// when it has exited.
	for _, o := range ops {
		start := time.Now()
		if code := o.stop(t, 2*time.Minute); code != 0 {
			t.Errorf("%s exited %d after SIGTERM, want 0", o.identity, code)
		}
		_, err := client.CoordinationV1().Leases(leaseNS).Get(ctx, lease.LeaseName(ring, o.identity), metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s's Lease after it exited: %v, want NotFound", o.identity, err)
		}
		t.Logf("%s left in %s", o.identity, time.Since(start).Round(time.Millisecond))
	}
	leases, err := client.CoordinationV1().Leases(leaseNS).List(ctx, metav1.ListOptions{LabelSelector: lease.LabelRing + "=" + ring})
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) != 0 {
		t.Errorf("%d ring Leases left after every replica exited", len(leases.Items))
	}
}

// convergedRing reads the ring's Leases and returns the ring they form once
// it has converged on replicas example-0 … example-<want-1> (see
// ringstatus.Ring.Converged) with this test's ring parameters.
func convergedRing(ctx context.Context, client kubernetes.Interface, want int) (*assign.Ring, error) {
	status, err := ringstatus.Read(ctx, client, leaseNS, ring)
	if err != nil {
		return nil, err
	}
	ids := make([]string, want)
	for i := range ids {
		ids[i] = fmt.Sprintf("example-%d", i)
	}
	if err := status.Converged(ids...); err != nil {
		return nil, err
	}
	if status.Params != ringCfg.Fingerprint() {
		return nil, fmt.Errorf("the replicas run ring parameters %s, the test assumes %s", status.Params, ringCfg.Fingerprint())
	}
	return assign.New(ringCfg, status.RingMembers)
}

func claimSummary(r *assign.Ring) string {
	var parts []string
	for _, m := range r.Members() {
		parts = append(parts, fmt.Sprintf("%s=%d", m, r.Partitions(m).Len()))
	}
	return strings.Join(parts, " ") + " partitions"
}

// createWidgets creates n Widgets with a few concurrent writers.
func createWidgets(t *testing.T, dyn dynamic.Interface, n int) {
	t.Helper()
	const writers = 8
	colors := []string{"red", "green", "blue", "amber"}
	next := make(chan int)
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for i := range next {
				w := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": widgetGVR.GroupVersion().String(),
					"kind":       "Widget",
					"metadata":   map[string]any{"name": widgetName(i), "namespace": widgetNS},
					"spec":       map[string]any{"color": colors[i%len(colors)], "size": int64(i%10 + 1)},
				}}
				if _, err := dyn.Resource(widgetGVR).Namespace(widgetNS).Create(context.Background(), w, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("creating %s: %w", widgetName(i), err)
					for range next { // drain so the feeder finishes
					}
					return
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// awaitAllReconciled waits until exactly n Widgets exist and each has
// status.observedGeneration == metadata.generation, and returns them.
func awaitAllReconciled(t *testing.T, dyn dynamic.Interface, n int) []unstructured.Unstructured {
	t.Helper()
	var items []unstructured.Unstructured
	testwait.NoError(t, time.Second, convergeLimit, fmt.Sprintf("%d Widgets reconciled", n), func() error {
		list, err := dyn.Resource(widgetGVR).Namespace(widgetNS).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(list.Items) != n {
			return fmt.Errorf("%d Widgets, want %d", len(list.Items), n)
		}
		pending := 0
		for _, w := range list.Items {
			observed, _, _ := unstructured.NestedInt64(w.Object, "status", "observedGeneration")
			if observed != w.GetGeneration() {
				pending++
			}
		}
		if pending > 0 {
			return fmt.Errorf("%d of %d Widgets not reconciled at their generation", pending, n)
		}
		items = list.Items
		return nil
	})
	return items
}

// checkChildren checks that each of the n existing Widgets owns, through a
// controller owner reference, a ConfigMap rendering its current spec and
// generation, as recorded in its status.
func checkChildren(t *testing.T, ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, n int) {
	t.Helper()
	list, err := dyn.Resource(widgetGVR).Namespace(widgetNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cms, err := client.CoreV1().ConfigMaps(widgetNS).List(ctx, metav1.ListOptions{LabelSelector: childLabel})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != n || len(cms.Items) != n {
		t.Fatalf("%d Widgets and %d ConfigMaps, want %d of each", len(list.Items), len(cms.Items), n)
	}
	byName := map[string]corev1.ConfigMap{}
	for _, cm := range cms.Items {
		byName[cm.Name] = cm
	}
	bad := 0
	for _, w := range list.Items {
		color, _, _ := unstructured.NestedString(w.Object, "spec", "color")
		statusCM, _, _ := unstructured.NestedString(w.Object, "status", "configMap")
		cm, ok := byName["widget-"+w.GetName()]
		var problem string
		switch ref := metav1.GetControllerOf(&cm); {
		case !ok:
			problem = "no ConfigMap"
		case statusCM != cm.Name:
			problem = fmt.Sprintf("status.configMap %q", statusCM)
		case ref == nil:
			problem = "ConfigMap has no controller owner reference"
		case ref.Kind != "Widget" || ref.APIVersion != widgetGVR.GroupVersion().String() || ref.Name != w.GetName() || ref.UID != w.GetUID():
			problem = fmt.Sprintf("ConfigMap's controller is %s %s %s (uid %s)", ref.APIVersion, ref.Kind, ref.Name, ref.UID)
		case cm.Data["color"] != color || cm.Data["generation"] != strconv.FormatInt(w.GetGeneration(), 10):
			problem = fmt.Sprintf("ConfigMap data %v, Widget color %q generation %d", cm.Data, color, w.GetGeneration())
		}
		if problem != "" {
			if bad < 5 {
				t.Errorf("Widget %s: %s", w.GetName(), problem)
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("... and %d more Widgets with child problems", bad-5)
	}
}

// checkOwnersAndBalance checks that every Widget was last reconciled by the
// member the ring assigns its key to, and that no member carries more than
// the ring's bounded load allows.
func checkOwnersAndBalance(t *testing.T, r *assign.Ring, objs []unstructured.Unstructured) {
	t.Helper()
	n := len(objs)
	members := r.Members()
	byReplica := map[string]int{}
	wrong := 0
	for _, w := range objs {
		by, _, _ := unstructured.NestedString(w.Object, "status", "reconciledBy")
		byReplica[by]++
		owner, ok := r.OwnerOfKey(shard.KeyOf(w.GetNamespace(), w.GetName()))
		if !ok || by != owner {
			if wrong < 5 {
				t.Errorf("Widget %s (partition %d) was reconciled by %q, but the ring assigns it to %q", w.GetName(), r.Partition(shard.KeyOf(w.GetNamespace(), w.GetName())), by, owner)
			}
			wrong++
		}
	}
	if wrong > 5 {
		t.Errorf("... %d Widgets in all reconciled by a replica that does not own them", wrong)
	}

	// The bound. The ring guarantees partitions, not keys: no member owns
	// more than ceil(Load × P / members) = ceil(1.05 × 271 / 3) = 95 of the
	// 271 partitions. Keys land in partitions by hash, so a member's share of
	// n keys is, to a good model, Binomial(n, q) with q = 95/271, whose mean
	// n·q = 175.3 is the key-level bound ceil(Load × n / members) = 175 up to
	// rounding, and whose standard deviation sqrt(n·q·(1−q)) ≈ 11 is the
	// granularity of partitions: a member that owns a few partitions with
	// more keys than average goes over 175 without the ring being wrong. The
	// tolerance is 4 standard deviations (43 keys, so at most 218 of 500):
	// exceeding it has probability ~3·10⁻⁵ under the model, so it means an
	// unbalanced assignment or a biased partition function, not bad luck.
	// The names and the hash are fixed, so the outcome is reproducible.
	maxParts := int(math.Ceil(ringCfg.Load * float64(ringCfg.Partitions) / float64(len(members))))
	q := float64(maxParts) / float64(ringCfg.Partitions)
	tolerance := int(math.Ceil(4 * math.Sqrt(float64(n)*q*(1-q))))
	bound := int(math.Ceil(ringCfg.Load*float64(n)/float64(len(members)))) + tolerance
	sort.Strings(members)
	var parts []string
	for _, m := range members {
		owned := r.Partitions(m).Len()
		parts = append(parts, fmt.Sprintf("%s %d Widgets on %d partitions", m, byReplica[m], owned))
		if owned > maxParts {
			t.Errorf("%s owns %d partitions, above the ring's bound %d", m, owned, maxParts)
		}
		if byReplica[m] == 0 || byReplica[m] > bound {
			t.Errorf("%s reconciled %d of %d Widgets, want between 1 and %d (ceil(%.2f × %d / %d) + %d)", m, byReplica[m], n, bound, ringCfg.Load, n, len(members), tolerance)
		}
	}
	t.Logf("reconciledBy: %s (bound %d per replica)", strings.Join(parts, ", "), bound)
}
