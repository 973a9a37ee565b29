package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/kshard/kshard/internal/testkubectl"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
)

// EnvKubebuilderCheck turns TestKubebuilderComponent on: it scaffolds a
// project with the kubebuilder CLI (minutes, and the CLI's first build takes
// longer), so `go test ./...` skips it; `make kubebuilder-check` sets it.
const EnvKubebuilderCheck = "KSHARD_KUBEBUILDER_CHECK"

// The scaffolded project, as a user would name it.
const (
	kbProject   = "widget-operator"
	kbNamespace = kbProject + "-system"
	kbManager   = kbProject + "-controller-manager"
)

// TestKubebuilderComponent scaffolds a kubebuilder v4 project with the
// kubebuilder CLI the tools module hack/kubebuilder pins (init, create api,
// create webhook, make manifests), turns on in config/default what a
// production user turns on (the authenticated metrics endpoint, the network
// policy, the Prometheus ServiceMonitor, cert-manager certificates for the
// metrics and the webhook), converts its config as docs/adapter.md says
// (an overlay config/kshard of config/default including deploy/kubebuilder,
// built by the Makefile in config/default's place) and checks the render:
// every patch finds its target (kustomize reports nothing when one does
// not), the StatefulSet carries everything config/default put in the
// Deployment's pod template, the metrics flag and port reach it, the
// Services, the NetworkPolicy and the ServiceMonitor select its pods, and
// the ring has what it needs. It then applies the render with
// --dry-run=server on a real API server, the ServiceMonitor CRD installed
// (generated from prometheus-operator's API by hack/kubebuilder/ensure.sh);
// cert-manager's Certificate and Issuer are left out of the dry run, as
// their CRDs are not installed.
func TestKubebuilderComponent(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: scaffolds a kubebuilder project and starts a real control plane; skipped with -short")
	}
	if os.Getenv(EnvKubebuilderCheck) == "" {
		t.Skipf("scaffolds a kubebuilder project (minutes); run it with make kubebuilder-check (sets %s=1)", EnvKubebuilderCheck)
	}
	if _, err := testkubectl.Path(); err != nil {
		t.Fatal(err) // make kubebuilder-check asked for this check: never skipped
	}
	tools := kubebuilderTools(t)
	project := scaffold(t, tools)
	enableProductionConfig(t, project)
	convert(t, project)

	def := renderObjects(t, filepath.Join(project, "config", "default"))
	ring := renderObjects(t, filepath.Join(project, "config", "kshard"))

	// Every patch finds its target: config/default's (and those of the
	// kustomizations it pulls in) in config/default's render, where they
	// apply to the Deployment; the conversion's in the converted render.
	for _, p := range collectPatches(t, filepath.Join(project, "config", "default")) {
		if !p.matches(def.objects) {
			t.Errorf("%s: patch %s matches nothing in config/default's render", p.file, p.describe())
		}
	}
	for _, p := range collectPatches(t, filepath.Join(project, "config", "kshard")) {
		if strings.HasPrefix(p.file, filepath.Join(project, "config", "default")) {
			continue // checked above
		}
		switch {
		case !p.deletes && !p.matches(ring.objects):
			t.Errorf("%s: patch %s matches nothing in config/kshard's render", p.file, p.describe())
		case p.deletes && !p.matches(def.objects):
			t.Errorf("%s: deleting patch %s matches nothing in config/default's render, which config/kshard converts", p.file, p.describe())
		case p.deletes && p.matches(ring.objects):
			t.Errorf("%s: the object patch %s deletes is still in config/kshard's render", p.file, p.describe())
		}
	}

	var dep appsv1.Deployment
	def.decode(t, "Deployment", kbManager, &dep)
	var sts appsv1.StatefulSet
	ring.decode(t, "StatefulSet", kbManager, &sts)
	for _, o := range ring.objects {
		if o.GetKind() == "Deployment" {
			t.Errorf("the Deployment %s is still rendered: it would run beside the ring", o.GetName())
		}
	}
	checkCarriesTemplate(t, &dep, &sts)
	checkRing(t, ring, &sts)
	checkMetrics(t, ring, &sts)
	checkHelmLimit(t, tools, project, ring)

	dryRun(t, tools, ring)
}

// checkHelmLimit keeps docs/adapter.md's word on the Helm chart true: the
// scaffold's chart generator (helm/v2-alpha) refuses the converted render,
// as it templates the manager from a Deployment.
func checkHelmLimit(t *testing.T, tools, project string, ring objectRender) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "install.yaml")
	if err := os.WriteFile(file, []byte(ring.yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(tools, "kubebuilder"), "edit", "--plugins=helm/v2-alpha", "--manifests="+file, "--output-dir="+t.TempDir())
	cmd.Dir = project
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no Deployment found") {
		t.Errorf("kubebuilder edit --plugins=helm/v2-alpha on the converted render: err=%v, want it refused for want of a Deployment, as docs/adapter.md says; update the docs (and cover the chart)\n%s", err, out)
	}
}

// kubebuilderTools builds (the first time) or finds the pinned kubebuilder
// CLI, controller-gen and the monitoring CRDs in kshard's cache.
func kubebuilderTools(t *testing.T) string {
	t.Helper()
	start := time.Now()
	script := filepath.Join(repoRoot(t), "hack", "kubebuilder", "ensure.sh")
	cmd := exec.Command("bash", script)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	dir := strings.TrimSpace(string(out))
	t.Logf("kubebuilder tools in %s (%s)", dir, time.Since(start).Round(time.Millisecond))
	return dir
}

func repoRoot(t *testing.T) string {
	t.Helper()
	return filepath.Dir(deployDir(t))
}

// run runs a command in dir and fails the test with its output on error.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	start := time.Now()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	t.Logf("%s %s: %s", filepath.Base(name), strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	return string(out)
}

// scaffold runs kubebuilder as its book does, into a temporary directory,
// with the project's Makefile using the cached controller-gen (its
// go-install-tool finds bin/controller-gen-<version> and installs nothing).
func scaffold(t *testing.T, tools string) string {
	t.Helper()
	project := filepath.Join(t.TempDir(), kbProject)
	if err := os.Mkdir(project, 0o755); err != nil {
		t.Fatal(err)
	}
	kb := filepath.Join(tools, "kubebuilder")
	// The scaffold is a module of its own, outside kshard's workspace.
	env := []string{"GOWORK=off"}
	run(t, project, env, kb, "init", "--domain", "example.com", "--repo", "example.com/"+kbProject)
	mk, err := os.ReadFile(filepath.Join(project, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	version := ""
	for _, line := range strings.Split(string(mk), "\n") {
		if v, ok := strings.CutPrefix(line, "CONTROLLER_TOOLS_VERSION ?= "); ok {
			version = strings.TrimSpace(v)
		}
	}
	if version == "" {
		t.Fatal("the scaffold's Makefile names no CONTROLLER_TOOLS_VERSION")
	}
	pinned := strings.TrimSpace(run(t, project, nil, filepath.Join(tools, "controller-gen"), "--version"))
	if !strings.HasSuffix(pinned, " "+version) {
		t.Fatalf("the scaffold uses controller-gen %s, hack/kubebuilder pins %q: pin the scaffold's version", version, pinned)
	}
	bin := filepath.Join(project, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(tools, "controller-gen"))
	if err != nil {
		t.Fatal(err)
	}
	versioned := filepath.Join(bin, "controller-gen-"+version)
	if err := os.WriteFile(versioned, raw, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(versioned, filepath.Join(bin, "controller-gen")); err != nil {
		t.Fatal(err)
	}
	run(t, project, env, kb, "create", "api", "--group", "demo", "--version", "v1", "--kind", "Widget", "--resource", "--controller")
	run(t, project, env, kb, "create", "webhook", "--group", "demo", "--version", "v1", "--kind", "Widget", "--defaulting", "--programmatic-validation")
	run(t, project, env, "make", "manifests")
	return project
}

// uncomment removes the leading "#" of each line from the first line
// containing from up to (not including) the first line after it containing
// to, or to the end of the file when to is empty, skipping blank lines. This
// is how kubebuilder's own tooling enables a commented section.
func uncomment(t *testing.T, file, from, to string) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, from) })
	if start < 0 {
		t.Fatalf("%s has no line %q: the scaffold changed; update the test", file, from)
	}
	end := len(lines)
	if to != "" {
		i := slices.IndexFunc(lines[start+1:], func(l string) bool { return strings.Contains(l, to) })
		if i < 0 {
			t.Fatalf("%s has no line %q after %q: the scaffold changed; update the test", file, to, from)
		}
		end = start + 1 + i
	}
	for i := start; i < end; i++ {
		if strings.TrimSpace(lines[i]) == "" {
			continue
		}
		if !strings.HasPrefix(lines[i], "#") {
			t.Fatalf("%s:%d: %q is not commented out: the scaffold changed; update the test", file, i+1, lines[i])
		}
		lines[i] = lines[i][1:]
	}
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}

// enableProductionConfig turns on config/default's commented-out parts a
// production user turns on. Metrics (the authenticated endpoint on :8443),
// the webhook and cert-manager are on already: the first by default, the
// others by create webhook.
func enableProductionConfig(t *testing.T, project string) {
	t.Helper()
	def := filepath.Join(project, "config", "default", "kustomization.yaml")
	uncomment(t, def, "#- ../prometheus", "# [METRICS] Expose")
	uncomment(t, def, "#- ../network-policy", "# Uncomment the patches line")
	// The metrics served with cert-manager's certificate, and the
	// replacements that name its Service in the Certificate and the
	// ServiceMonitor.
	uncomment(t, def, "#- path: cert_metrics_manager_patch.yaml", "# [WEBHOOK]")
	uncomment(t, def, "Uncomment the following block to enable certificates for metrics", "Uncomment the following block if you have any webhook")
	uncomment(t, filepath.Join(project, "config", "prometheus", "kustomization.yaml"), "#patches:", "")
}

// convert applies docs/adapter.md's conversion of config/: an overlay of
// config/default including deploy/kubebuilder, which the Makefile builds in
// config/default's place.
func convert(t *testing.T, project string) {
	t.Helper()
	overlay := filepath.Join(project, "config", "kshard")
	if err := os.Mkdir(overlay, 0o755); err != nil {
		t.Fatal(err)
	}
	component, err := filepath.Rel(overlay, filepath.Join(repoRoot(t), "deploy", "kubebuilder"))
	if err != nil {
		t.Fatal(err)
	}
	k := fmt.Sprintf("resources:\n  - ../default\ncomponents:\n  - %s\n", component)
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	mkfile := filepath.Join(project, "Makefile")
	mk, err := os.ReadFile(mkfile)
	if err != nil {
		t.Fatal(err)
	}
	// docs/adapter.md: deploy, undeploy and build-installer build it.
	const from, to = "build config/default", "build config/kshard"
	if n := strings.Count(string(mk), from); n != 3 {
		t.Fatalf("the Makefile has %d lines building config/default, docs/adapter.md says 3 (deploy, undeploy, build-installer)", n)
	}
	if err := os.WriteFile(mkfile, []byte(strings.ReplaceAll(string(mk), from, to)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// objectRender is a kustomization rendered by `kubectl kustomize`: its output
// and every object in it.
type objectRender struct {
	dir     string
	yaml    string
	objects []*unstructured.Unstructured
}

// renderObjects runs `kubectl kustomize dir` and keeps every object.
func renderObjects(t *testing.T, dir string) objectRender {
	t.Helper()
	kubectl, err := testkubectl.Path()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "kustomize", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
	}
	r := objectRender{dir: dir, yaml: string(out)}
	for _, doc := range strings.Split(r.yaml, "\n---\n") {
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &o.Object); err != nil {
			t.Fatalf("parsing the render of %s: %v", dir, err)
		}
		if len(o.Object) > 0 {
			r.objects = append(r.objects, o)
		}
	}
	return r
}

func (r objectRender) find(kind, name string) *unstructured.Unstructured {
	for _, o := range r.objects {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func (r objectRender) decode(t *testing.T, kind, name string, into any) {
	t.Helper()
	o := r.find(kind, name)
	if o == nil {
		var have []string
		for _, o := range r.objects {
			have = append(have, o.GetKind()+"/"+o.GetName())
		}
		t.Fatalf("the render of %s has no %s %s; it has %v", r.dir, kind, name, have)
	}
	raw, err := yaml.Marshal(o.Object)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, into); err != nil {
		t.Fatalf("decoding %s %s: %v", kind, name, err)
	}
}

// patch is one entry of a kustomization's patches: its target selector, or
// for a patch without one, the kind and name of the object it holds.
type patch struct {
	file                                                           string
	group, version, kind, name, namespace, labelSel, annotationSel string
	// deletes: a strategic-merge patch with $patch: delete, whose target
	// is gone from the render it applied to.
	deletes bool
}

func (p patch) describe() string {
	return fmt.Sprintf("{group: %q, version: %q, kind: %q, name: %q, namespace: %q, labelSelector: %q, annotationSelector: %q}",
		p.group, p.version, p.kind, p.name, p.namespace, p.labelSel, p.annotationSel)
}

// matches reports whether the patch selects an object of objs. A rendered
// name matches a selector's name when it equals it or ends with "-" and it
// (the namePrefix of the kustomization including the patch's is applied
// after it matched); selectors' fields are regular expressions in kustomize,
// but the scaffold's and the component's are plain names.
func (p patch) matches(objs []*unstructured.Unstructured) bool {
	for _, o := range objs {
		gv := strings.SplitN(o.GetAPIVersion(), "/", 2)
		group, version := "", gv[0]
		if len(gv) == 2 {
			group, version = gv[0], gv[1]
		}
		switch {
		case p.kind != "" && p.kind != o.GetKind(),
			p.group != "" && p.group != group,
			p.version != "" && p.version != version,
			p.namespace != "" && !strings.HasSuffix(o.GetNamespace(), p.namespace),
			p.name != "" && o.GetName() != p.name && !strings.HasSuffix(o.GetName(), "-"+p.name):
			continue
		}
		if !selects(p.labelSel, o.GetLabels()) || !selects(p.annotationSel, o.GetAnnotations()) {
			continue
		}
		return true
	}
	return false
}

func selects(selector string, set map[string]string) bool {
	if selector == "" {
		return true
	}
	s, err := labels.Parse(selector)
	return err == nil && s.Matches(labels.Set(set))
}

// collectPatches reads the patches of the kustomization in dir and of every
// kustomization it pulls in (resources and components that are
// directories), recursively.
func collectPatches(t *testing.T, dir string) []patch {
	t.Helper()
	file := filepath.Join(dir, "kustomization.yaml")
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources  []string
		Components []string
		Patches    []struct {
			Path   string
			Patch  string
			Target *struct {
				Group, Version, Kind, Name, Namespace string
				LabelSelector                         string `json:"labelSelector"`
				AnnotationSelector                    string `json:"annotationSelector"`
			}
		}
		PatchesStrategicMerge []string `json:"patchesStrategicMerge"`
		PatchesJSON6902       []any    `json:"patchesJson6902"`
	}
	if err := yaml.Unmarshal(raw, &k); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if len(k.PatchesStrategicMerge) > 0 || len(k.PatchesJSON6902) > 0 {
		t.Fatalf("%s uses the deprecated patchesStrategicMerge or patchesJson6902, which this test does not read", file)
	}
	var out []patch
	for _, e := range k.Patches {
		p := patch{file: file}
		body := []byte(e.Patch)
		if e.Path != "" {
			if body, err = os.ReadFile(filepath.Join(dir, e.Path)); err != nil {
				t.Fatal(err)
			}
		}
		var smp map[string]any
		if yaml.Unmarshal(body, &smp) == nil {
			p.deletes = smp["$patch"] == "delete"
		}
		if e.Target != nil {
			tg := e.Target
			p.group, p.version, p.kind, p.name, p.namespace = tg.Group, tg.Version, tg.Kind, tg.Name, tg.Namespace
			p.labelSel, p.annotationSel = tg.LabelSelector, tg.AnnotationSelector
		} else {
			// A strategic-merge patch without a target names its object.
			var o unstructured.Unstructured
			if err := yaml.Unmarshal(body, &o.Object); err != nil {
				t.Fatalf("%s: patch %s: %v", file, e.Path, err)
			}
			p.kind, p.name = o.GetKind(), o.GetName()
			if gv := strings.SplitN(o.GetAPIVersion(), "/", 2); len(gv) == 2 {
				p.group = gv[0]
			}
		}
		if p.kind == "" && p.name == "" && p.labelSel == "" && p.annotationSel == "" {
			t.Fatalf("%s: a patch with an empty target would patch every object; the test cannot check it", file)
		}
		out = append(out, p)
	}
	for _, sub := range append(k.Resources, k.Components...) {
		d := filepath.Join(dir, sub)
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			out = append(out, collectPatches(t, d)...)
		}
	}
	return out
}

// checkCarriesTemplate checks that the StatefulSet's pod template has
// everything of the Deployment's as config/default rendered it (all its
// patches applied): labels, annotations, volumes, and per container the
// arguments, ports, volume mounts, probes and security settings.
func checkCarriesTemplate(t *testing.T, dep *appsv1.Deployment, sts *appsv1.StatefulSet) {
	t.Helper()
	dt, st := dep.Spec.Template, sts.Spec.Template
	subset(t, "pod label", dt.Labels, st.Labels)
	subset(t, "pod annotation", dt.Annotations, st.Annotations)
	subset(t, "StatefulSet label", dep.Labels, sts.Labels)
	if !labels.Equals(dep.Spec.Selector.MatchLabels, sts.Spec.Selector.MatchLabels) {
		t.Errorf("the StatefulSet's selector %v is not the Deployment's %v", sts.Spec.Selector.MatchLabels, dep.Spec.Selector.MatchLabels)
	}
	if dt.Spec.ServiceAccountName != st.Spec.ServiceAccountName {
		t.Errorf("serviceAccountName %q, the Deployment's is %q", st.Spec.ServiceAccountName, dt.Spec.ServiceAccountName)
	}
	for _, v := range dt.Spec.Volumes {
		if !slices.ContainsFunc(st.Spec.Volumes, func(w corev1.Volume) bool { return w.Name == v.Name }) {
			t.Errorf("the StatefulSet lacks the Deployment's volume %s", v.Name)
		}
	}
	if len(dt.Spec.Containers) != len(st.Spec.Containers) {
		t.Fatalf("the StatefulSet has %d containers, the Deployment %d", len(st.Spec.Containers), len(dt.Spec.Containers))
	}
	for i, dc := range dt.Spec.Containers {
		sc := st.Spec.Containers[i]
		if dc.Name != sc.Name || dc.Image != sc.Image || !slices.Equal(dc.Command, sc.Command) {
			t.Errorf("container %d: %s %s %v, the Deployment's %s %s %v", i, sc.Name, sc.Image, sc.Command, dc.Name, dc.Image, dc.Command)
		}
		for _, a := range dc.Args {
			if !slices.Contains(sc.Args, a) {
				t.Errorf("container %s lacks the Deployment's argument %s: %v", sc.Name, a, sc.Args)
			}
		}
		for _, p := range dc.Ports {
			if !slices.Contains(sc.Ports, p) {
				t.Errorf("container %s lacks the Deployment's port %v", sc.Name, p)
			}
		}
		for _, m := range dc.VolumeMounts {
			if !slices.ContainsFunc(sc.VolumeMounts, func(n corev1.VolumeMount) bool { return apiequality.Semantic.DeepEqual(m, n) }) {
				t.Errorf("container %s lacks the Deployment's volume mount %v", sc.Name, m)
			}
		}
		if sc.LivenessProbe == nil || sc.ReadinessProbe == nil || sc.SecurityContext == nil {
			t.Errorf("container %s lacks a probe or its security context", sc.Name)
		}
	}
	if st.Spec.SecurityContext == nil || st.Spec.SecurityContext.RunAsNonRoot == nil || !*st.Spec.SecurityContext.RunAsNonRoot {
		t.Error("the pod's security context lost runAsNonRoot")
	}
}

func subset(t *testing.T, what string, want, have map[string]string) {
	t.Helper()
	for k, v := range want {
		if have[k] != v {
			t.Errorf("%s %s=%s missing (have %v)", what, k, v, have)
		}
	}
}

// flagValue is the value the Go flag package ends with for a boolean or
// valued flag: the last occurrence wins.
func flagValue(args []string, name string) (string, bool) {
	value, found := "", false
	for _, a := range args {
		a = "-" + strings.TrimLeft(a, "-")
		if a == "-"+name {
			value, found = "true", true
		} else if v, ok := strings.CutPrefix(a, "-"+name+"="); ok {
			value, found = v, true
		}
	}
	return value, found
}

// checkRing checks what the ring needs: replicas, no leader election, the
// pod's name and namespace, a grace period its leave fits in, the headless
// Service, and the Role bound to the pods' ServiceAccount.
func checkRing(t *testing.T, ring objectRender, sts *appsv1.StatefulSet) {
	t.Helper()
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas < 2 {
		t.Errorf("replicas = %s, want a ring of several", fmtPtr(sts.Spec.Replicas))
	}
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("podManagementPolicy = %q, want Parallel", sts.Spec.PodManagementPolicy)
	}
	c := sts.Spec.Template.Spec.Containers[0]
	if v, _ := flagValue(c.Args, "leader-elect"); v == "true" {
		t.Errorf("the manager runs with --leader-elect, which the converted binary refuses: %v", c.Args)
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
	if g := sts.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g <= 30 {
		t.Errorf("terminationGracePeriodSeconds = %s, want above the manager's 30s shutdown timeout", fmtPtr(g))
	}
	var headless corev1.Service
	ring.decode(t, "Service", sts.Spec.ServiceName, &headless)
	if headless.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("the StatefulSet's Service %s is not headless", headless.Name)
	}
	var role rbacv1.Role
	ring.decode(t, "Role", kbManager+"-kshard-ring", &role)
	var binding rbacv1.RoleBinding
	ring.decode(t, "RoleBinding", kbManager+"-kshard-ring", &binding)
	if binding.RoleRef.Name != role.Name || len(binding.Subjects) != 1 ||
		binding.Subjects[0].Name != sts.Spec.Template.Spec.ServiceAccountName || binding.Subjects[0].Namespace != sts.Namespace {
		t.Errorf("the ring's RoleBinding %v → %v does not bind %s to the pods' ServiceAccount %s/%s",
			binding.Subjects, binding.RoleRef.Name, role.Name, sts.Namespace, sts.Spec.Template.Spec.ServiceAccountName)
	}
	granted := map[string][]string{}
	for _, rule := range role.Rules {
		for _, r := range rule.Resources {
			granted[r] = append(granted[r], rule.Verbs...)
		}
	}
	for res, verbs := range map[string][]string{"leases": {"get", "list", "watch", "create", "update", "delete"}, "pods": {"get"}} {
		for _, v := range verbs {
			if !slices.Contains(granted[res], v) {
				t.Errorf("the ring's Role does not grant %s on %s", v, res)
			}
		}
	}
	for _, o := range []metaObject{&sts.ObjectMeta, &headless.ObjectMeta, &role.ObjectMeta, &binding.ObjectMeta} {
		if o.GetNamespace() != kbNamespace {
			t.Errorf("%s is in namespace %q, want config/default's %s", o.GetName(), o.GetNamespace(), kbNamespace)
		}
	}
}

func fmtPtr[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

type metaObject interface {
	GetName() string
	GetNamespace() string
}

// checkMetrics checks that the metrics are on where the scaffold serves
// them, and that what reaches them selects the StatefulSet's pods: every
// Service, the NetworkPolicies, and the ServiceMonitor through the metrics
// Service.
func checkMetrics(t *testing.T, ring objectRender, sts *appsv1.StatefulSet) {
	t.Helper()
	pod := labels.Set(sts.Spec.Template.Labels)
	c := sts.Spec.Template.Spec.Containers[0]
	addr, _ := flagValue(c.Args, "metrics-bind-address")
	if addr != ":8443" {
		t.Errorf("--metrics-bind-address = %q, want :8443 (the scaffold's authenticated endpoint; its default 0 turns metrics off): %v", addr, c.Args)
	}
	if v, _ := flagValue(c.Args, "metrics-secure"); v == "false" {
		t.Errorf("metrics are served without authentication: %v", c.Args)
	}
	if v, _ := flagValue(c.Args, "metrics-cert-path"); v == "" {
		t.Errorf("metrics are not served with cert-manager's certificate: %v", c.Args)
	}
	port := strings.TrimPrefix(addr, ":")

	var metrics corev1.Service
	ring.decode(t, "Service", kbManager+"-metrics-service", &metrics)
	if len(metrics.Spec.Ports) != 1 || metrics.Spec.Ports[0].TargetPort.String() != port {
		t.Errorf("the metrics Service's ports %v do not target the manager's metrics port %s", metrics.Spec.Ports, port)
	}
	for _, o := range ring.objects {
		switch o.GetKind() {
		case "Service":
			var s corev1.Service
			ring.decode(t, "Service", o.GetName(), &s)
			if len(s.Spec.Selector) == 0 || !labels.SelectorFromSet(s.Spec.Selector).Matches(pod) {
				t.Errorf("Service %s selects %v, which the StatefulSet's pods (%v) do not match", s.Name, s.Spec.Selector, pod)
			}
		case "NetworkPolicy":
			var np networkingv1.NetworkPolicy
			ring.decode(t, "NetworkPolicy", o.GetName(), &np)
			if len(np.Spec.PodSelector.MatchLabels) == 0 || !labels.SelectorFromSet(np.Spec.PodSelector.MatchLabels).Matches(pod) {
				t.Errorf("NetworkPolicy %s selects %v, which the StatefulSet's pods (%v) do not match", np.Name, np.Spec.PodSelector.MatchLabels, pod)
			}
		}
	}
	var np networkingv1.NetworkPolicy
	ring.decode(t, "NetworkPolicy", kbProject+"-allow-metrics-traffic", &np)
	allowed := false
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			allowed = allowed || (p.Port != nil && p.Port.String() == port)
		}
	}
	if !allowed {
		t.Errorf("the metrics NetworkPolicy does not admit port %s: %v", port, np.Spec.Ingress)
	}
	sm := ring.find("ServiceMonitor", kbManager+"-metrics-monitor")
	if sm == nil {
		t.Fatal("no ServiceMonitor rendered: config/prometheus is not on")
	}
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if len(sel) == 0 || !labels.SelectorFromSet(sel).Matches(labels.Set(metrics.Labels)) {
		t.Errorf("the ServiceMonitor selects %v, which the metrics Service's labels %v do not match", sel, metrics.Labels)
	}
	server, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(server) == 0 || !strings.Contains(fmt.Sprint(server[0]), metrics.Name+"."+metrics.Namespace+".svc") {
		t.Errorf("the ServiceMonitor's TLS server name is not the metrics Service's: %v", server)
	}
}

// dryRun applies the render with --dry-run=server on a real API server:
// the namespace and the ServiceMonitor CRD for real first (a dry run cannot
// create into a namespace or of a kind that does not exist), cert-manager's
// objects left out (their CRDs are not installed).
func dryRun(t *testing.T, tools string, ring objectRender) {
	t.Helper()
	cp := controlplane.ForTest(t, controlplane.Options{})
	crd := filepath.Join(tools, "crds", "monitoring.coreos.com_servicemonitors.yaml")
	kubectl(t, cp, "apply", "--server-side", "-f", crd)
	kubectl(t, cp, "wait", "--for=condition=Established", "--timeout=60s", "crd/servicemonitors.monitoring.coreos.com")
	kubectl(t, cp, "create", "namespace", kbNamespace)
	var docs, left []string
	for _, o := range ring.objects {
		if strings.HasPrefix(o.GetAPIVersion(), "cert-manager.io/") {
			left = append(left, o.GetKind()+"/"+o.GetName())
			continue
		}
		if o.GetKind() == "Namespace" {
			continue // created above
		}
		raw, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(raw))
	}
	t.Logf("left out of the dry run (cert-manager's CRDs are not installed): %v", left)
	file := filepath.Join(t.TempDir(), "ring.yaml")
	if err := os.WriteFile(file, []byte(strings.Join(docs, "---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	out := kubectl(t, cp, "apply", "--dry-run=server", "-f", file)
	for _, want := range []string{
		"statefulset.apps/" + kbManager,
		"service/" + kbManager + "-ring",
		"service/" + kbManager + "-metrics-service",
		"role.rbac.authorization.k8s.io/" + kbManager + "-kshard-ring",
		"networkpolicy.networking.k8s.io/" + kbProject + "-allow-metrics-traffic",
		"servicemonitor.monitoring.coreos.com/" + kbManager + "-metrics-monitor",
		"validatingwebhookconfiguration.admissionregistration.k8s.io/" + kbProject + "-validating-webhook-configuration",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run did not report %s:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "(server dry run)"); n != len(docs) {
		t.Errorf("dry run reported %d objects, the render has %d:\n%s", n, len(docs), out)
	}
}
