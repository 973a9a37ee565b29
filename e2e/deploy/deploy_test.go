package deploy

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/kshard/kshard/internal/testkubectl"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
)

func deployDir(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "deploy")
}

func kubectl(t *testing.T, cp *controlplane.ControlPlane, args ...string) string {
	t.Helper()
	path := testkubectl.Require(t)
	out, err := exec.Command(path, append([]string{"--kubeconfig", cp.KubeconfigPath()}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestManifestsPassServerSideDryRun applies the namespace for real (namespaced
// objects cannot be dry-run into a namespace that does not exist) and then the
// whole kustomization with --dry-run=server: every object is validated,
// defaulted and admitted by the real API server, RBAC and CRD schema included.
func TestManifestsPassServerSideDryRun(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts a real control plane; skipped with -short")
	}
	cp := controlplane.ForTest(t, controlplane.Options{})
	dir := deployDir(t)
	kubectl(t, cp, "apply", "-f", filepath.Join(dir, "namespace.yaml"))
	out := kubectl(t, cp, "apply", "--dry-run=server", "-k", dir)
	for _, want := range []string{
		"customresourcedefinition.apiextensions.k8s.io/widgets.demo.kshard.io",
		"statefulset.apps/example-operator",
		"role.rbac.authorization.k8s.io/example-operator-ring",
		"clusterrole.rbac.authorization.k8s.io/kshard-example-operator",
		"poddisruptionbudget.policy/example-operator",
		"service/example-operator-metrics",
		"networkpolicy.networking.k8s.io/example-operator-metrics",
		"clusterrole.rbac.authorization.k8s.io/kshard-example-operator-metrics-reader",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run did not report %s:\n%s", want, out)
		}
	}
	// The components, as an overlay includes them. The labels component
	// grants in the namespace it scopes the operator to, which must exist.
	kubectl(t, cp, "create", "namespace", "widgets")
	for overlay, want := range map[string]string{
		"labels":   "role.rbac.authorization.k8s.io/kshard-example-operator-labels",
		"priority": "priorityclass.scheduling.k8s.io/kshard-example-operator",
	} {
		out := kubectl(t, cp, "apply", "--dry-run=server", "-k", filepath.Join("testdata", overlay))
		if !strings.Contains(out, want) || !strings.Contains(out, "statefulset.apps/example-operator") {
			t.Errorf("dry run of deploy/ with the %s component did not report %s and the StatefulSet:\n%s", overlay, want, out)
		}
	}
}

// TestPodTemplateMeetsRestrictedPodSecurity creates (dry run) a Pod from the
// StatefulSet's template in a namespace enforcing "restricted": Pod Security
// admission enforces on Pods, not on workload objects, so this is the check
// that the operator's pods would be admitted.
func TestPodTemplateMeetsRestrictedPodSecurity(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts a real control plane; skipped with -short")
	}
	cp := controlplane.ForTest(t, controlplane.Options{})
	rendered := kubectl(t, cp, "kustomize", deployDir(t))
	var sts *appsv1.StatefulSet
	for _, doc := range strings.Split(rendered, "\n---\n") {
		if strings.Contains(doc, "kind: StatefulSet") {
			sts = &appsv1.StatefulSet{}
			if err := yaml.Unmarshal([]byte(doc), sts); err != nil {
				t.Fatalf("parsing StatefulSet: %v", err)
			}
		}
	}
	if sts == nil {
		t.Fatal("no StatefulSet in deploy/")
	}
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("podManagementPolicy = %q, want Parallel", sts.Spec.PodManagementPolicy)
	}
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cp.Config())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "psa-restricted", Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sts.Spec.Template.Spec.ServiceAccountName, Namespace: ns.Name}}
	if _, err := cs.CoreV1().ServiceAccounts(ns.Name).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: sts.Spec.Template.ObjectMeta, Spec: sts.Spec.Template.Spec}
	pod.Name, pod.Namespace = "example-operator-0", ns.Name
	if _, err := cs.CoreV1().Pods(ns.Name).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("restricted Pod Security rejects the operator's pod template: %v", err)
	}
	// The check can fail: a privileged variant of the same template is refused.
	bad := pod.DeepCopy()
	bad.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr(true)
	if _, err := cs.CoreV1().Pods(ns.Name).Create(ctx, bad, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err == nil || !bytes.Contains([]byte(err.Error()), []byte("restricted")) {
		t.Fatalf("a pod allowing privilege escalation was admitted (err=%v): the namespace does not enforce restricted", err)
	}
	// Drain must fit in the termination grace period.
	if g := sts.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g <= 30 {
		t.Errorf("terminationGracePeriodSeconds = %v, want above the 30s shutdown timeout", g)
	}
}

// TestRBACGrantsWhatTheOperatorUses applies the manifests for real and
// asks the API server, as the operator's service account (impersonated),
// whether it may do what the operator does: in the base, the full cache and
// secure metrics; with the labels component, patch on Widgets and
// ConfigMaps to write their partition labels, in its namespace only. A few
// verbs it must not have show that the answers can be no.
func TestRBACGrantsWhatTheOperatorUses(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts a real control plane; skipped with -short")
	}
	cp := controlplane.ForTest(t, controlplane.Options{})
	dir := deployDir(t)
	kubectl(t, cp, "apply", "-f", filepath.Join(dir, "namespace.yaml"))
	kubectl(t, cp, "apply", "-k", dir)
	cfg := cp.Config()
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:kshard-system:example-operator",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:kshard-system", "system:authenticated"},
	}
	sa := kubernetes.NewForConfigOrDie(cfg)
	for _, tc := range []struct {
		verb, group, resource, sub, namespace string
		allowed                               bool
	}{
		{"list", "demo.kshard.io", "widgets", "", "", true},
		{"watch", "", "configmaps", "", "", true},
		{"create", "", "configmaps", "", "team-a", true},
		{"update", "", "configmaps", "", "team-a", true},
		{"patch", "demo.kshard.io", "widgets", "status", "team-a", true},
		{"create", "authorization.k8s.io", "selfsubjectaccessreviews", "", "", true}, // how a replica learns it may patch
		{"update", "coordination.k8s.io", "leases", "", "kshard-system", true},
		{"delete", "coordination.k8s.io", "leases", "", "kshard-system", true},
		{"get", "", "pods", "", "kshard-system", true},
		{"create", "authentication.k8s.io", "tokenreviews", "", "", true},        // secure metrics: who scrapes
		{"create", "authorization.k8s.io", "subjectaccessreviews", "", "", true}, // and may they
		// Least privilege: nothing beyond. No patch in the base: only
		// --cache-mode=labels uses it, and the labels component grants it.
		{"patch", "demo.kshard.io", "widgets", "", "team-a", false},
		{"patch", "", "configmaps", "", "team-a", false},
		{"delete", "", "configmaps", "", "team-a", false},
		{"update", "demo.kshard.io", "widgets", "", "team-a", false},
		{"update", "coordination.k8s.io", "leases", "", "team-a", false},
		{"get", "", "secrets", "", "kshard-system", false},
	} {
		checkAccess(t, sa, tc.verb, tc.group, tc.resource, tc.sub, tc.namespace, tc.allowed)
	}

	// With the labels component: patch for the partition label, in the
	// namespace it scopes the operator to and nowhere else.
	kubectl(t, cp, "create", "namespace", "widgets")
	kubectl(t, cp, "apply", "-k", filepath.Join("testdata", "labels"))
	for _, tc := range []struct {
		group, resource, namespace string
		allowed                    bool
	}{
		{"demo.kshard.io", "widgets", "widgets", true},
		{"", "configmaps", "widgets", true},
		{"demo.kshard.io", "widgets", "team-a", false},
		{"", "configmaps", "kube-system", false},
	} {
		checkAccess(t, sa, "patch", tc.group, tc.resource, "", tc.namespace, tc.allowed)
	}
}

// checkAccess asks the API server whether sa's user may verb the resource.
func checkAccess(t *testing.T, sa kubernetes.Interface, verb, group, resource, sub, namespace string, allowed bool) {
	t.Helper()
	review := &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
		Verb: verb, Group: group, Resource: resource, Subresource: sub, Namespace: namespace,
	}}}
	got, err := sa.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), review, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("asking whether the operator may %s %s: %v", verb, resource, err)
	}
	if got.Status.Allowed != allowed {
		t.Errorf("the operator's service account may %s %s.%s/%s in %q: %v, want %v (%s)",
			verb, resource, group, sub, namespace, got.Status.Allowed, allowed, got.Status.Reason)
	}
}

func ptr[T any](v T) *T { return &v }
