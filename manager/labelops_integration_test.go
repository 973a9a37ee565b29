package manager

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kshard/kshard/manager/kshardtest/controlplane"
	"github.com/kshard/kshard/shard"
	"github.com/kshard/kshard/shard/cache"
)

// Namespaces of the restricted-identity tests: the ring's Leases, and the
// objects its replicas watch and label.
const (
	restrictedLeaseNS  = "it-rbac"
	restrictedObjectNS = "it-rbac-objects"
	restrictedObjects  = 12
)

// restrictedRing starts a control plane whose restricted user
// (controlplane.RestrictedUser) may run a replica: its Leases in
// restrictedLeaseNS, and get, list and watch on the ConfigMaps of
// restrictedObjectNS, plus patch when patch is set (the Role
// "it-configmaps" holds that grant, for the test to revoke). It returns
// the restricted identity's config and an admin client.
func restrictedRing(t *testing.T, patch bool) (*rest.Config, kubernetes.Interface) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test (starts an API server); -short runs unit tests only")
	}
	cp := controlplane.ForTest(t, controlplane.Options{})
	cs := kubernetes.NewForConfigOrDie(cp.Config())
	ctx := context.Background()
	for _, ns := range []string{restrictedLeaseNS, restrictedObjectNS} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createConfigMaps(t, cs, restrictedObjectNS, restrictedObjects)
	verbs := []string{"get", "list", "watch"}
	if patch {
		verbs = append(verbs, "patch")
	}
	grant(t, cs, restrictedLeaseNS, "it-leases", rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
		Verbs: []string{"get", "list", "watch", "create", "update", "delete"}})
	grant(t, cs, restrictedObjectNS, "it-configmaps", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: verbs})
	return cp.RestrictedConfig(), cs
}

// grant creates Role name in ns with rule, bound to the restricted user.
func grant(t *testing.T, cs kubernetes.Interface, ns, name string, rule rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: []rbacv1.PolicyRule{rule}}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: controlplane.RestrictedUser}}}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// labelledRestricted runs a replica with the gate-free sharded cache over
// the objects of restrictedObjectNS.
func labelledRestricted(o *Options) {
	o.CacheMode = CacheLabels
	o.Partitions = 16
	o.WatchNamespace = restrictedObjectNS
}

// mayPatchConfigMaps asks the API server, as cfg's identity, whether it may
// patch the ConfigMaps of restrictedObjectNS.
func mayPatchConfigMaps(t *testing.T, cfg *rest.Config) bool {
	t.Helper()
	review := &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
		Namespace: restrictedObjectNS, Verb: "patch", Resource: "configmaps"}}}
	got, err := kubernetes.NewForConfigOrDie(cfg).AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), review, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Status.Allowed
}

// configMapMode returns how r's cache holds ConfigMaps.
func configMapMode(t *testing.T, r *replica) cache.KindMode {
	t.Helper()
	for _, k := range r.mgr.GetCache().ModeReport() {
		if k.Kind.Kind == "ConfigMap" {
			return k
		}
	}
	t.Fatalf("%s has no ConfigMap informer", r.mgr.Identity())
	return cache.KindMode{}
}

// A replica asked for the gate-free sharded cache whose identity may not
// patch a kind caches that kind whole instead, says why on
// /readyz?verbose, reports mode full in kshard_cache_mode, writes nothing,
// and reconciles every key.
func TestNoPatchPermissionCachesTheKindWhole(t *testing.T) {
	cfg, cs := restrictedRing(t, false)
	if mayPatchConfigMaps(t, cfg) {
		t.Fatal("the restricted identity may patch ConfigMaps: the test's RBAC is wrong")
	}
	j := &journal{}
	r := startReplica(t, cfg, restrictedLeaseNS, "r-0", j, time.Millisecond, labelledRestricted)
	ctx := context.Background()
	eventually(t, 30*time.Second, "the restricted replica to own the ring", func() (bool, string) { return ringSettled(ctx, cs, restrictedLeaseNS, "r-0") })
	eventually(t, 20*time.Second, "every key reconciled", func() (bool, string) {
		seen := map[string]bool{}
		for _, iv := range j.snapshot() {
			seen[iv.key] = true
		}
		return len(seen) == restrictedObjects, fmt.Sprintf("%d of %d keys", len(seen), restrictedObjects)
	})
	m := configMapMode(t, r)
	if m.Mode != cache.ModeFull || !strings.Contains(m.Reason, "may not patch configmaps") || !strings.Contains(m.Reason, "grant") {
		t.Fatalf("ConfigMaps cached %q (%s); want full, with the missing patch permission as the reason", m.Mode, m.Reason)
	}
	if _, body := get("http://" + r.mgr.ProbeAddr() + "/readyz?verbose"); !strings.Contains(body, "/v1, Kind=ConfigMap full (this replica may not patch configmaps") {
		t.Errorf("/readyz?verbose does not give the reason:\n%s", body)
	}
	if _, body := get("http://" + r.mgr.MetricsAddr() + "/metrics"); !strings.Contains(body, `kshard_cache_mode{group="",kind="/v1, Kind=ConfigMap",kind_name="ConfigMap",mode="full",version="v1"} 1`) {
		t.Errorf("/metrics has no kshard_cache_mode line saying ConfigMaps are cached whole")
	}
	if n := labelPatches(r); n != 0 {
		t.Errorf("%d label patches sent by a replica that may not patch", n)
	}
	list, err := cs.CoreV1().ConfigMaps(restrictedObjectNS).List(ctx, metav1.ListOptions{LabelSelector: labelKeyOf(t)})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("labelled ConfigMaps: %d, %v; want none", len(list.Items), err)
	}
}

// A label patch the API server refuses after the replica started (its
// patch permission revoked) is reported on /readyz?verbose with what to
// do; the kind stays on labels, and the object the replica could not
// label is still cached and reconciled, through the unlabelled view.
func TestLabelPatchRefusedAtRuntimeIsReported(t *testing.T) {
	cfg, cs := restrictedRing(t, true)
	j := &journal{}
	r := startReplica(t, cfg, restrictedLeaseNS, "r-0", j, time.Millisecond, labelledRestricted)
	ctx := context.Background()
	eventually(t, 30*time.Second, "the restricted replica to own the ring", func() (bool, string) { return ringSettled(ctx, cs, restrictedLeaseNS, "r-0") })
	key, p := labelKeyOf(t), shard.NewPartitioner(16)
	eventually(t, 30*time.Second, "every ConfigMap labelled", func() (bool, string) {
		list, err := cs.CoreV1().ConfigMaps(restrictedObjectNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, cm := range list.Items {
			if cm.Labels[key] != shard.PartitionLabelValue(p.Partition(shard.KeyOf(cm.Namespace, cm.Name))) {
				return false, cm.Name + " not labelled"
			}
		}
		return true, ""
	})
	if m := configMapMode(t, r); m.Mode != cache.ModeLabels || m.Reason != "" {
		t.Fatalf("before the revocation ConfigMaps are cached %q (%s), want labels without a reason", m.Mode, m.Reason)
	}

	// Revoke patch, and wait until the API server's authorizer says so.
	role, err := cs.RbacV1().Roles(restrictedObjectNS).Get(ctx, "it-configmaps", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	role.Rules[0].Verbs = slices.DeleteFunc(role.Rules[0].Verbs, func(v string) bool { return v == "patch" })
	if _, err := cs.RbacV1().Roles(restrictedObjectNS).Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the revocation to take effect", func() (bool, string) { return !mayPatchConfigMaps(t, cfg), "still allowed" })

	// A new object needs a label the replica may no longer write.
	if _, err := cs.CoreV1().ConfigMaps(restrictedObjectNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-revoke"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	newKey := shard.KeyOf(restrictedObjectNS, "after-revoke")
	eventually(t, 20*time.Second, "the refusal reported", func() (bool, string) {
		m := configMapMode(t, r)
		return strings.Contains(m.Reason, "refuses to patch"), m.Reason
	})
	m := configMapMode(t, r)
	if m.Mode != cache.ModeLabels || !strings.Contains(m.Reason, "grant the ring's service account patch") {
		t.Errorf("after the refusal ConfigMaps are cached %q (%s); want labels, with what to do", m.Mode, m.Reason)
	}
	if _, body := get("http://" + r.mgr.ProbeAddr() + "/readyz?verbose"); !strings.Contains(body, "/v1, Kind=ConfigMap labels (the API server refuses to patch") {
		t.Errorf("/readyz?verbose does not report the refusal:\n%s", body)
	}
	eventually(t, 20*time.Second, "the unlabelled object reconciled", func() (bool, string) {
		for _, iv := range j.snapshot() {
			if iv.key == newKey {
				return true, ""
			}
		}
		return false, newKey + " not reconciled"
	})
	if !slices.Contains(cachedKeys(t, r), newKey) {
		t.Errorf("the object the replica could not label is not in its cache")
	}
	cm, err := cs.CoreV1().ConfigMaps(restrictedObjectNS).Get(ctx, "after-revoke", metav1.GetOptions{})
	if err != nil || cm.Labels[key] != "" {
		t.Errorf("after-revoke: labels %v, %v; want unlabelled", cm.Labels, err)
	}
}
