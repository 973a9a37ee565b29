package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
	"github.com/kshard/kshard/shard"
)

// Label keys of the unlabel test: the example operator's ring now, the
// same ring under an earlier partition count, and another ring's.
const (
	ringKey    = ring + ".kshard.io/xx1-key-p271"
	oldRingKey = ring + ".kshard.io/xx1-key-p13"
	otherKey   = "other.kshard.io/xx1-key-p271"
)

// unlabelDoc is `kshard unlabel -o json`.
type unlabelDoc struct {
	Ring    string `json:"ring"`
	DryRun  string `json:"dryRun"`
	Results []struct {
		Resource   string         `json:"resource"`
		Namespace  string         `json:"namespace"`
		Scanned    int            `json:"scanned"`
		Labelled   int            `json:"labelled"`
		Unlabelled int            `json:"unlabelled"`
		Failed     int            `json:"failed"`
		Keys       map[string]int `json:"keys"`
		Error      string         `json:"error"`
	} `json:"results"`
}

// TestUnlabel removes a ring's partition labels from ConfigMaps and
// Widgets on a real API server: dry runs change nothing, --key removes one
// key, the namespaces given bound what is touched, other labels and other
// rings' keys stay; it refuses while a live replica of the ring labels,
// and says which permission a restricted user lacks and which resource
// does not exist.
func TestUnlabel(t *testing.T) {
	skipIfShort(t)
	cp := controlplane.ForTest(t, controlplane.Options{})
	kc := cp.KubeconfigPath()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	client := kubernetes.NewForConfigOrDie(cp.Config())
	dyn := dynamic.NewForConfigOrDie(cp.Config())
	installCRD(t, ctx, dyn)
	leaseNS := "ul-ring"
	for _, ns := range []string{leaseNS, "ul-a", "ul-b", "ul-c"} {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// In each object namespace: 12 ConfigMaps with the ring's label, 4 of
	// them with the old key too, 3 with another ring's, 2 bare; 5 Widgets
	// with the ring's label.
	for _, ns := range []string{"ul-a", "ul-b", "ul-c"} {
		for i := range 17 {
			labels := map[string]string{"app": "kept"}
			switch {
			case i < 12:
				labels[ringKey] = fmt.Sprint(i)
				if i < 4 {
					labels[oldRingKey] = fmt.Sprint(i)
				}
			case i < 15:
				labels[otherKey] = "1"
			}
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Labels: labels}}
			if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 5 {
			w := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "demo.kshard.io/v1alpha1", "kind": "Widget",
				"metadata": map[string]any{"name": fmt.Sprintf("w-%d", i), "labels": map[string]any{ringKey: fmt.Sprint(i)}},
				"spec":     map[string]any{"color": "red", "size": int64(i)},
			}}
			if _, err := dyn.Resource(widgetGVR).Namespace(ns).Create(ctx, w, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// counts returns how many ConfigMaps and Widgets of ns carry key.
	counts := func(ns, key string) (configMaps, widgets int) {
		t.Helper()
		cms, err := client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: key})
		if err != nil {
			t.Fatal(err)
		}
		ws, err := dyn.Resource(widgetGVR).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: key})
		if err != nil {
			t.Fatal(err)
		}
		return len(cms.Items), len(ws.Items)
	}
	expect := func(ns, key string, wantCM, wantW int) {
		t.Helper()
		if cm, w := counts(ns, key); cm != wantCM || w != wantW {
			t.Errorf("%s: %d ConfigMaps and %d Widgets carry %s, want %d and %d", ns, cm, w, key, wantCM, wantW)
		}
	}
	unlabel := func(args ...string) result {
		return kshard(t, 2*time.Minute, append([]string{"unlabel", "--ring", ring, "--kubeconfig", kc, "--lease-namespace", leaseNS}, args...)...)
	}

	// A live replica of the ring in cache mode labels: refused.
	live := liveLabellingLease(leaseNS)
	if _, err := client.CoordinationV1().Leases(leaseNS).Create(ctx, live, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := unlabel("configmaps", "widgets", "-A")
	if r.code != 1 || !strings.Contains(r.stderr, "live replicas in cache mode labels") || !strings.Contains(r.stderr, "op-0") {
		t.Errorf("with a live labelling replica: code %d, stderr %q; want a refusal naming op-0", r.code, r.stderr)
	}
	// The Leases' namespace defaults to -n's, the objects' (ul-a here): it
	// holds none of the ring's Leases, so the check looks in every
	// namespace and finds op-0 in ul-ring.
	r = kshard(t, 2*time.Minute, "unlabel", "--ring", ring, "configmaps", "-n", "ul-a", "--kubeconfig", kc)
	if r.code != 1 || !strings.Contains(r.stderr, "op-0 in namespace "+leaseNS) {
		t.Errorf("Leases in another namespace than -n's: code %d, stderr %q; want a refusal naming op-0 in %s", r.code, r.stderr, leaseNS)
	}
	// The earlier form: -A for the objects and -n for the Leases' namespace.
	r = kshard(t, 2*time.Minute, "unlabel", "--ring", ring, "configmaps", "-A", "-n", leaseNS, "--kubeconfig", kc)
	if r.code != 1 || !strings.Contains(r.stderr, "op-0 in namespace "+leaseNS) {
		t.Errorf("-A -n %s: code %d, stderr %q; want a refusal naming op-0", leaseNS, r.code, r.stderr)
	}
	expect("ul-a", ringKey, 12, 5)

	// Dry runs (past the check with --force) change nothing.
	r = unlabel("configmaps,widgets", "-A", "--dry-run", "--force", "-o", "json")
	var doc unlabelDoc
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil {
		t.Fatalf("client dry run: code %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if len(doc.Results) != 2 || doc.DryRun != "client" || doc.Results[0].Labelled != 36 || doc.Results[0].Keys[oldRingKey] != 12 ||
		doc.Results[1].Resource != "widgets.demo.kshard.io" || doc.Results[1].Labelled != 15 || doc.Results[0].Unlabelled != 0 {
		t.Errorf("client dry run: %+v", doc)
	}
	r = unlabel("configmaps", "-n", "ul-a", "--dry-run=server", "--force", "-o", "wide")
	if r.code != 0 || !strings.Contains(r.stdout, "dry run (server)") || !strings.Contains(r.stderr, "configmaps in namespace ul-a: 17 scanned, 12 would be unlabelled") {
		t.Errorf("server dry run: code %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	expect("ul-a", ringKey, 12, 5)
	expect("ul-a", oldRingKey, 4, 0)

	// --key of an earlier partition count's key, which the live ring no
	// longer writes: allowed while it runs; in ul-a only.
	r = unlabel("configmaps", "-n", "ul-a", "--key", oldRingKey)
	if r.code != 0 {
		t.Fatalf("--key: code %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	expect("ul-a", oldRingKey, 0, 0)
	expect("ul-a", ringKey, 12, 5)
	expect("ul-b", oldRingKey, 4, 0)
	// --key of the key the live ring writes: refused.
	if r = unlabel("configmaps", "-n", "ul-a", "--key", ringKey); r.code != 1 || !strings.Contains(r.stderr, "live replicas in cache mode labels") {
		t.Errorf("--key of the live ring's key: code %d, stderr %q; want a refusal", r.code, r.stderr)
	}

	if err := client.CoordinationV1().Leases(leaseNS).Delete(ctx, live.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// Every key of the ring, in ul-a and ul-b: ul-c and other labels stay.
	// Two namespaces at once through the deprecated --object-namespace,
	// with a warning, and -o yaml.
	r = unlabel("configmaps", "widgets", "--object-namespace", "ul-a,ul-b", "-o", "yaml")
	doc = unlabelDoc{}
	if r.code != 0 || yaml.Unmarshal([]byte(r.stdout), &doc) != nil {
		t.Fatalf("unlabel: code %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "warning: --object-namespace is deprecated") {
		t.Errorf("--object-namespace without its deprecation warning: %q", r.stderr)
	}
	if len(doc.Results) != 4 || doc.Results[0].Namespace != "ul-a" || doc.Results[0].Unlabelled != 12 || doc.Results[1].Unlabelled != 12 ||
		doc.Results[2].Unlabelled != 5 || doc.Results[3].Unlabelled != 5 {
		t.Errorf("unlabel results %+v", doc)
	}
	for _, ns := range []string{"ul-a", "ul-b"} {
		expect(ns, ringKey, 0, 0)
		expect(ns, oldRingKey, 0, 0)
		expect(ns, otherKey, 3, 0)
		expect(ns, "app=kept", 17, 0)
	}
	expect("ul-c", ringKey, 12, 5)
	expect("ul-c", oldRingKey, 4, 0)

	t.Logf("unlabel -o yaml:\n%s", r.stdout)

	// Bad input against the live cluster.
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"gizmos", "-A"}, `the API server has no resource "gizmos"`},
		{[]string{"namespaces", "-A"}, "namespaces are cluster-scoped"},
	} {
		r := unlabel(bad.args...)
		if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, bad.want) {
			t.Errorf("%v: code %d, stderr %q; want 1 and %q", bad.args, r.code, r.stderr, bad.want)
		}
	}

	// A user who may list the ConfigMaps of ul-c but not patch them: the
	// resource stops at its first patch, naming the permission.
	grantRestricted(t, ctx, client, "ul-c", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}})
	restricted := kubernetes.NewForConfigOrDie(cp.RestrictedConfig())
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := restricted.CoreV1().ConfigMaps("ul-c").List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the restricted user's grant did not take effect: %v", err)
	}
	r = kshard(t, 2*time.Minute, "unlabel", "--ring", ring, "configmaps", "-n", "ul-c",
		"--kubeconfig", cp.RestrictedKubeconfigPath(), "--lease-namespace", leaseNS)
	t.Logf("unlabel as a user who may not patch:\n%s%s", r.stdout, r.stderr)
	if r.code != 1 || !strings.Contains(r.stdout, `forbidden: this user may not patch configmaps in namespace "ul-c"`) ||
		!strings.Contains(r.stdout, "kubectl auth can-i patch configmaps -n ul-c") || !strings.Contains(r.stderr, "could not read the Leases") ||
		!strings.Contains(r.stderr, "1 of 1 resource(s) not fully unlabelled") {
		t.Errorf("restricted user: code %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	expect("ul-c", ringKey, 12, 5)
}

// liveLabellingLease is a member Lease of the ring, renewed now for an
// hour, whose replica publishes cache mode labels.
func liveLabellingLease(ns string) *coordinationv1.Lease {
	holder, secs := "op-0", int32(3600)
	now := metav1.NewMicroTime(time.Now())
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: lease.LeaseName(ring, holder), Namespace: ns,
			Labels: map[string]string{lease.LabelRing: ring, membership.LabelState: "active", membership.LabelPartitions: "0"},
			Annotations: map[string]string{membership.AnnotationClaim: membership.EncodeClaim(shard.NewPartitionSet(271)), membership.AnnotationIncarnation: "i-0",
				membership.AnnotationGeneration: "1", membership.AnnotationParams: shard.Config{}.Fingerprint(),
				membership.AnnotationCacheMode: "labels", membership.AnnotationCachedObjects: "3"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &now},
	}
}

// grantRestricted grants the control plane's restricted user rule in ns.
func grantRestricted(t *testing.T, ctx context.Context, client kubernetes.Interface, ns string, rule rbacv1.PolicyRule) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "restricted", Namespace: ns}, Rules: []rbacv1.PolicyRule{rule}}
	if _, err := client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "restricted", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "restricted"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: controlplane.RestrictedUser}}}
	if _, err := client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
