package deploy

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kshard/kshard/internal/testkubectl"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// rendered is what `kubectl kustomize` makes of a directory, by kind.
type rendered struct {
	sts      *appsv1.StatefulSet
	policies []networkingv1.NetworkPolicy
	roles    []rbacv1.Role
	cluster  []rbacv1.ClusterRole
	services []corev1.Service
}

// render runs `kubectl kustomize dir` (no API server needed) and parses the
// objects the checks below look at.
func render(t *testing.T, dir string) rendered {
	t.Helper()
	path := testkubectl.Require(t)
	out, err := exec.Command(path, "kustomize", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
	}
	var r rendered
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("parsing the render of %s: %v", dir, err)
		}
		var into any
		switch meta.Kind {
		case "StatefulSet":
			r.sts = &appsv1.StatefulSet{}
			into = r.sts
		case "NetworkPolicy":
			r.policies = append(r.policies, networkingv1.NetworkPolicy{})
			into = &r.policies[len(r.policies)-1]
		case "Role":
			r.roles = append(r.roles, rbacv1.Role{})
			into = &r.roles[len(r.roles)-1]
		case "ClusterRole":
			r.cluster = append(r.cluster, rbacv1.ClusterRole{})
			into = &r.cluster[len(r.cluster)-1]
		case "Service":
			r.services = append(r.services, corev1.Service{})
			into = &r.services[len(r.services)-1]
		default:
			continue
		}
		if err := yaml.Unmarshal([]byte(doc), into); err != nil {
			t.Fatalf("parsing a %s of %s: %v", meta.Kind, dir, err)
		}
	}
	if r.sts == nil {
		t.Fatalf("no StatefulSet in the render of %s", dir)
	}
	return r
}

// flag returns the operator container's value of --name, the last value of each
// flag winning as in the flag package.
func (r rendered) flag(name string) (string, bool) {
	var v string
	found := false
	for _, a := range r.sts.Spec.Template.Spec.Containers[0].Args {
		if val, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			v, found = val, true
		}
	}
	return v, found
}

// patchGrants lists "role: resource" for every rule granting patch, other
// than on a status subresource (the reconciler's status writes).
func (r rendered) patchGrants() []string {
	var out []string
	check := func(owner string, rules []rbacv1.PolicyRule) {
		for _, rule := range rules {
			if !slices.Contains(rule.Verbs, "patch") && !slices.Contains(rule.Verbs, "*") {
				continue
			}
			for _, res := range rule.Resources {
				if !strings.HasSuffix(res, "/status") {
					out = append(out, owner+": "+res)
				}
			}
		}
	}
	for _, role := range r.roles {
		check("Role "+role.Namespace+"/"+role.Name, role.Rules)
	}
	for _, role := range r.cluster {
		check("ClusterRole "+role.Name, role.Rules)
	}
	return out
}

// TestManifestsByMode: the base deploy/ spreads its replicas over nodes and
// zones as a preference, serves secure metrics on :8443 behind a
// NetworkPolicy that admits only the metrics port, grants the reviews secure
// metrics needs and no patch (labels mode only); the labels component adds
// patch in one namespace, the one it confines the operator to.
func TestManifestsByMode(t *testing.T) {
	base := render(t, deployDir(t))
	pod := base.sts.Spec.Template.Spec
	keys := map[string]bool{}
	for _, c := range pod.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != corev1.ScheduleAnyway {
			t.Errorf("topology spread over %s is %s, want ScheduleAnyway (a single-node cluster must still schedule every replica)", c.TopologyKey, c.WhenUnsatisfiable)
		}
		if c.LabelSelector == nil || c.LabelSelector.MatchLabels["app.kubernetes.io/name"] != pod.ServiceAccountName {
			t.Errorf("topology spread over %s selects %v, want the operator's pods", c.TopologyKey, c.LabelSelector)
		}
		keys[c.TopologyKey] = true
	}
	if !keys["kubernetes.io/hostname"] || !keys["topology.kubernetes.io/zone"] {
		t.Errorf("topology spread over %v, want hosts and zones", keys)
	}

	if v, _ := base.flag("metrics-secure"); v != "true" {
		t.Errorf("--metrics-secure=%q, want true", v)
	}
	if v, _ := base.flag("metrics-bind-address"); v != ":8443" {
		t.Errorf("--metrics-bind-address=%q, want :8443", v)
	}
	if _, ok := base.flag("v"); !ok {
		t.Error("no --v: the log verbosity should be visible to edit")
	}
	var metricsPort int32
	for _, p := range pod.Containers[0].Ports {
		if p.Name == "metrics" {
			metricsPort = p.ContainerPort
		}
	}
	if metricsPort != 8443 {
		t.Errorf("container port metrics = %d, want 8443", metricsPort)
	}

	if len(base.policies) != 1 {
		t.Fatalf("%d NetworkPolicies, want 1", len(base.policies))
	}
	np := base.policies[0]
	if np.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"] != pod.ServiceAccountName || !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("NetworkPolicy selects %v with types %v, want the operator's pods, Ingress", np.Spec.PodSelector, np.Spec.PolicyTypes)
	}
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port == nil || (*p.Port != intstr.FromString("metrics") && *p.Port != intstr.FromInt32(8443)) {
				t.Errorf("NetworkPolicy admits port %v, want the metrics port only", p.Port)
			}
		}
		if len(rule.Ports) == 0 {
			t.Error("a NetworkPolicy ingress rule admits every port")
		}
		for _, from := range rule.From {
			if from.NamespaceSelector == nil || from.NamespaceSelector.MatchLabels["metrics"] != "enabled" {
				t.Errorf("NetworkPolicy admits %+v, want namespaces labelled metrics=enabled", from)
			}
		}
	}

	if got := base.patchGrants(); len(got) > 0 {
		t.Errorf("the base grants patch (only --cache-mode=labels needs it, in its component): %v", got)
	}
	reviews := map[string]bool{}
	for _, role := range base.cluster {
		for _, rule := range role.Rules {
			if slices.Contains(rule.Verbs, "create") {
				for _, res := range rule.Resources {
					reviews[res] = true
				}
			}
		}
	}
	if !reviews["tokenreviews"] || !reviews["subjectaccessreviews"] {
		t.Errorf("no create on tokenreviews and subjectaccessreviews (secure metrics): %v", reviews)
	}
	if v, _ := base.flag("cache-mode"); v == "labels" {
		t.Error("the base runs --cache-mode=labels")
	}

	labels := render(t, filepath.Join("testdata", "labels"))
	if v, _ := labels.flag("cache-mode"); v != "labels" {
		t.Errorf("labels component: --cache-mode=%q, want labels", v)
	}
	ns, _ := labels.flag("watch-namespace")
	if ns == "" || ns == "kube-system" {
		t.Errorf("labels component: --watch-namespace=%q, want the one namespace it labels", ns)
	}
	if v, _ := labels.flag("keep-place-on-leave"); v != "true" {
		t.Errorf("labels component: --keep-place-on-leave=%q, want true (peers would cache a restarting replica's share)", v)
	}
	got := labels.patchGrants()
	want := []string{"Role " + ns + "/kshard-example-operator-labels: widgets", "Role " + ns + "/kshard-example-operator-labels: configmaps"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("labels component grants patch as %v, want %v (in --watch-namespace only)", got, want)
	}

	priority := render(t, filepath.Join("testdata", "priority"))
	if pc := priority.sts.Spec.Template.Spec.PriorityClassName; pc != "kshard-example-operator" {
		t.Errorf("priority component: priorityClassName %q", pc)
	}
	if pc := pod.PriorityClassName; pc != "" {
		t.Errorf("the base sets priorityClassName %q; it is optional (priority/)", pc)
	}
}
