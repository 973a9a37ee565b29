package deploy

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/kshard/kshard/manager/kshardtest/controlplane"
)

// TestKubebuilderComponent renders a kubebuilder project's config/ (the
// scaffold's shape, in testdata) with deploy/kubebuilder included from
// config/manager, as docs/adapter.md says, checks that the Deployment became
// a StatefulSet the ring can run (no --leader-elect, the pod's name and
// namespace in the environment, the image `make deploy` sets, a Role for
// Leases and pods), and applies it with --dry-run=server.
func TestKubebuilderComponent(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts a real control plane; skipped with -short")
	}
	cp := controlplane.ForTest(t, controlplane.Options{})
	dir := filepath.Join("testdata", "kubebuilder", "config", "default")
	rendered := kubectl(t, cp, "kustomize", dir)
	var sts *appsv1.StatefulSet
	var ring *rbacv1.Role
	services := map[string]bool{}
	for _, doc := range strings.Split(rendered, "\n---\n") {
		var meta struct {
			Kind     string
			Metadata struct{ Name string }
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("parsing the rendered config: %v", err)
		}
		switch meta.Kind {
		case "Deployment":
			t.Errorf("the manager Deployment %s is still rendered: it would run beside the ring", meta.Metadata.Name)
		case "Service":
			services[meta.Metadata.Name] = true
		case "StatefulSet":
			sts = &appsv1.StatefulSet{}
			if err := yaml.Unmarshal([]byte(doc), sts); err != nil {
				t.Fatal(err)
			}
		case "Role":
			if strings.HasSuffix(meta.Metadata.Name, "kshard-ring") {
				ring = &rbacv1.Role{}
				if err := yaml.Unmarshal([]byte(doc), ring); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if sts == nil || ring == nil {
		t.Fatalf("rendered no StatefulSet (%v) or no kshard-ring Role (%v):\n%s", sts != nil, ring != nil, rendered)
	}
	c := sts.Spec.Template.Spec.Containers[0]
	if slices.Contains(c.Args, "--leader-elect") {
		t.Errorf("the manager container still has --leader-elect: %v", c.Args)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if env["POD_NAME"] != "metadata.name" || env["POD_NAMESPACE"] != "metadata.namespace" {
		t.Errorf("the manager's environment from the downward API = %v, want POD_NAME and POD_NAMESPACE", env)
	}
	if c.Image != "example.com/widget-operator:v0.1.0" {
		t.Errorf("image %q: config/manager's image edit did not reach the StatefulSet", c.Image)
	}
	if !services[sts.Spec.ServiceName] {
		t.Errorf("serviceName %q names no rendered Service (%v)", sts.Spec.ServiceName, services)
	}
	granted := map[string][]string{}
	for _, rule := range ring.Rules {
		for _, r := range rule.Resources {
			granted[r] = append(granted[r], rule.Verbs...)
		}
	}
	for res, verbs := range map[string][]string{"leases": {"get", "list", "watch", "create", "update", "delete"}, "pods": {"get"}} {
		for _, v := range verbs {
			if !slices.Contains(granted[res], v) {
				t.Errorf("the kshard-ring Role does not grant %s on %s", v, res)
			}
		}
	}
	kubectl(t, cp, "create", "namespace", "widget-operator-system")
	out := kubectl(t, cp, "apply", "--dry-run=server", "-k", dir)
	for _, want := range []string{"statefulset.apps/widget-operator-controller-manager", "role.rbac.authorization.k8s.io/widget-operator-kshard-ring", "service/widget-operator-controller-manager-ring"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run did not report %s:\n%s", want, out)
		}
	}
}
