package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/kshard/kshard/internal/assign"
	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/shard"
)

// fakeCluster is an API server for the namespace flags: Leases in any
// namespace (listed per namespace or across all, by label selector),
// namespaces, discovery of configmaps (namespaced) and namespaces
// (cluster-scoped), and the metadata of the ConfigMaps in objects.
type fakeCluster struct {
	leases []coordinationv1.Lease
	// objects are ConfigMaps, by "namespace/name", with their labels.
	objects map[string]map[string]string
	// forbidAll makes the cluster-wide Lease list forbidden.
	forbidAll bool
}

func (f *fakeCluster) serve(t *testing.T) string {
	t.Helper()
	const leasesPath = "/apis/coordination.k8s.io/v1/"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		fail := func(code int, reason metav1.StatusReason) {
			w.WriteHeader(code)
			enc.Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Failure", Code: int32(code), Reason: reason})
		}
		path := r.URL.Path
		switch {
		case path == leasesPath+"leases" || strings.HasPrefix(path, leasesPath+"namespaces/") && strings.HasSuffix(path, "/leases"):
			ns := strings.TrimSuffix(strings.TrimPrefix(path, leasesPath+"namespaces/"), "/leases")
			if path == leasesPath+"leases" {
				if f.forbidAll {
					fail(http.StatusForbidden, metav1.StatusReasonForbidden)
					return
				}
				ns = ""
			}
			sel, err := labels.Parse(r.URL.Query().Get("labelSelector"))
			if err != nil {
				fail(http.StatusBadRequest, metav1.StatusReasonBadRequest)
				return
			}
			list := coordinationv1.LeaseList{TypeMeta: metav1.TypeMeta{Kind: "LeaseList", APIVersion: "coordination.k8s.io/v1"}}
			for _, l := range f.leases {
				if (ns == "" || l.Namespace == ns) && sel.Matches(labels.Set(l.Labels)) {
					list.Items = append(list.Items, l)
				}
			}
			enc.Encode(list)
		case strings.HasPrefix(path, "/api/v1/namespaces/") && strings.Count(path, "/") == 4:
			enc.Encode(corev1.Namespace{TypeMeta: metav1.TypeMeta{Kind: "Namespace", APIVersion: "v1"},
				ObjectMeta: metav1.ObjectMeta{Name: strings.TrimPrefix(path, "/api/v1/namespaces/")}})
		case path == "/api":
			enc.Encode(metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}})
		case path == "/apis":
			enc.Encode(metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}})
		case path == "/api/v1":
			enc.Encode(metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "v1",
				APIResources: []metav1.APIResource{
					{Name: "configmaps", SingularName: "configmap", Namespaced: true, Kind: "ConfigMap", Verbs: []string{"get", "list"}, ShortNames: []string{"cm"}},
					{Name: "namespaces", SingularName: "namespace", Namespaced: false, Kind: "Namespace", Verbs: []string{"get", "list"}, ShortNames: []string{"ns"}},
				}})
		case strings.HasPrefix(path, "/api/v1/namespaces/") && strings.Contains(path, "/configmaps/"):
			rest := strings.TrimPrefix(path, "/api/v1/namespaces/")
			ns, name, _ := strings.Cut(rest, "/configmaps/")
			l, ok := f.objects[ns+"/"+name]
			if !ok {
				fail(http.StatusNotFound, metav1.StatusReasonNotFound)
				return
			}
			enc.Encode(metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"},
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l}})
		default:
			fail(http.StatusNotFound, metav1.StatusReasonNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return writeKubeconfig(t, srv.URL)
}

// ringIn is the Leases of a settled two-member ring ops (members a and b)
// in namespace ns.
func ringIn(t *testing.T, ns string) []coordinationv1.Lease {
	t.Helper()
	ring, err := assign.New(shard.Config{}, []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	var out []coordinationv1.Lease
	for _, id := range []string{"a", "b"} {
		l := member(id, "active", ring.Partitions(id))
		l.Namespace = ns
		out = append(out, l)
	}
	return out
}

// statusDoc is what the tests read of status -o json and -o yaml.
type statusDoc struct {
	Namespace string `json:"namespace"`
	Rings     []struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		Members   []struct {
			Identity    string `json:"identity"`
			Incarnation string `json:"incarnation"`
			Lease       string `json:"lease"`
		} `json:"members"`
	} `json:"rings"`
}

// -o wide adds the incarnation, epoch and Lease of each member; -o yaml is
// the JSON document's fields in YAML.
func TestStatusOutputFormats(t *testing.T) {
	kc := (&fakeCluster{leases: ringIn(t, "ops")}).serve(t)
	code, table, stderr := run(t, "status", "--kubeconfig", kc, "-n", "ops")
	if code != 0 || stderr != "" {
		t.Fatalf("code %d stderr %q", code, stderr)
	}
	code, wide, _ := run(t, "status", "--kubeconfig", kc, "-n", "ops", "-o", "wide")
	if code != 0 {
		t.Fatalf("-o wide: code %d", code)
	}
	if strings.Contains(table, "INCARNATION") || strings.Contains(table, "i-a") {
		t.Errorf("the default table shows the incarnation, which -o wide adds:\n%s", table)
	}
	for _, want := range []string{"INCARNATION  EPOCH  LEASE", "i-a          1      ops-a", "i-b          1      ops-b"} {
		if !strings.Contains(wide, want) {
			t.Errorf("-o wide lacks %q:\n%s", want, wide)
		}
	}
	// The wide table is the default one with columns added on the right.
	if !strings.HasPrefix(wide, strings.SplitN(table, "\n", 3)[0]) {
		t.Errorf("-o wide's ring line differs from the table's:\n%s\n%s", wide, table)
	}

	var fromJSON, fromYAML statusDoc
	code, out, _ := run(t, "status", "--kubeconfig", kc, "-n", "ops", "-o", "json")
	if code != 0 || json.Unmarshal([]byte(out), &fromJSON) != nil {
		t.Fatalf("-o json: code %d\n%s", code, out)
	}
	code, out, _ = run(t, "status", "--kubeconfig", kc, "--lease-namespace", "ops", "-o", "yaml")
	if code != 0 || strings.HasPrefix(out, "{") {
		t.Fatalf("-o yaml: code %d\n%s", code, out)
	}
	if err := yaml.Unmarshal([]byte(out), &fromYAML); err != nil {
		t.Fatalf("-o yaml is not YAML: %v\n%s", err, out)
	}
	if fromYAML.Namespace != "ops" || len(fromYAML.Rings) != 1 || len(fromYAML.Rings[0].Members) != 2 ||
		fromYAML.Rings[0].Members[1].Incarnation != "i-b" || fromYAML.Rings[0].Members[1].Lease != "ops-b" {
		t.Errorf("-o yaml = %+v", fromYAML)
	}
	if j, y := mustJSON(t, fromJSON), mustJSON(t, fromYAML); j != y {
		t.Errorf("-o json and -o yaml differ:\n%s\n%s", j, y)
	}
	for _, key := range []string{"namespace: ops", "ringMembers:", "overlapping: 0", "renewAgeSeconds:"} {
		if !strings.Contains(out, key) {
			t.Errorf("-o yaml lacks %q (the JSON field names):\n%s", key, out)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// -A shows the rings of every namespace, each under its own namespace,
// even two rings of one name; it needs a cluster-wide list, and says so
// when that is forbidden.
func TestStatusAllNamespaces(t *testing.T) {
	leases := append(ringIn(t, "ops"), ringIn(t, "team-b")...)
	other := member("x", "active", shard.FullPartitionSet(271))
	other.Namespace, other.Name, other.Labels[lease.LabelRing] = "team-b", "other-x", "other"
	leases = append(leases, other)
	kc := (&fakeCluster{leases: leases}).serve(t)

	code, out, stderr := run(t, "status", "-A", "--kubeconfig", kc)
	if code != 0 || stderr != "" {
		t.Fatalf("code %d stderr %q", code, stderr)
	}
	for _, want := range []string{"RING ops  namespace ops ", "RING ops  namespace team-b ", "RING other  namespace team-b "} {
		if !strings.Contains(out, want) {
			t.Errorf("status -A lacks %q:\n%s", want, out)
		}
	}
	if i, j := strings.Index(out, "namespace ops "), strings.Index(out, "RING ops  namespace team-b"); i > j {
		t.Errorf("rings not sorted by namespace:\n%s", out)
	}
	// Each ring is read from its own namespace's Leases: two members each.
	if strings.Count(out, "members 2 (live and active) of 2 Leases") != 2 {
		t.Errorf("the two rings named ops were mixed up:\n%s", out)
	}

	code, out, _ = run(t, "--all-namespaces", "status", "--kubeconfig", kc, "--ring", "ops", "-o", "yaml")
	var doc statusDoc
	if code != 0 || yaml.Unmarshal([]byte(out), &doc) != nil {
		t.Fatalf("-A -o yaml: code %d\n%s", code, out)
	}
	if doc.Namespace != "" || len(doc.Rings) != 2 || doc.Rings[0].Namespace != "ops" || doc.Rings[1].Namespace != "team-b" || doc.Rings[1].Name != "ops" {
		t.Errorf("status -A --ring ops -o yaml = %+v", doc)
	}

	code, _, stderr = run(t, "status", "-A", "--kubeconfig", kc, "--ring", "nope")
	if code != 1 {
		t.Errorf("-A --ring nope: exit %d, want 1", code)
	}
	oneLineErr(t, stderr, `ring "nope" has no Lease in any namespace`)

	kc = (&fakeCluster{leases: leases, forbidAll: true}).serve(t)
	code, _, stderr = run(t, "status", "-A", "--kubeconfig", kc)
	if code != 1 {
		t.Errorf("forbidden: exit %d, want 1", code)
	}
	oneLineErr(t, stderr, "cluster-wide", "kubectl auth can-i list leases -A", "--lease-namespace")
}

// ownerDoc is what the tests read of owner -o json and -o yaml.
type ownerDoc struct {
	Resource  string `json:"resource"`
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	Owner     string `json:"owner"`
	Exists    *bool  `json:"exists"`
	Labels    []struct {
		Key     string `json:"key"`
		Current bool   `json:"current"`
	} `json:"partitionLabels"`
}

// owner names its object as kubectl does (<name> -n NS), finds the ring's
// Leases in --lease-namespace, else in -n's namespace, else in the one
// namespace that has them; the earlier <namespace>/<name> -n LEASES form
// works with a warning.
func TestOwnerNamespaces(t *testing.T) {
	label := "ops.kshard.io/xx1-key-p271"
	f := &fakeCluster{
		leases:  append(ringIn(t, "operators"), ringIn(t, "kshard-demo")...),
		objects: map[string]map[string]string{"team-a/cm": {label: "3"}, "kshard-demo/widget-0000": {}},
	}
	kc := f.serve(t)
	owner := func(args ...string) (ownerDoc, string) {
		t.Helper()
		code, out, stderr := run(t, append([]string{"owner", "--kubeconfig", kc, "-o", "json"}, args...)...)
		var doc ownerDoc
		if code != 0 || json.Unmarshal([]byte(out), &doc) != nil {
			t.Fatalf("owner %v: code %d stdout %q stderr %q", args, code, out, stderr)
		}
		return doc, stderr
	}

	// Objects and Leases in one namespace: -n is all it takes.
	doc, stderr := owner("configmaps", "widget-0000", "-n", "kshard-demo")
	if doc.Key != "kshard-demo/widget-0000" || doc.Namespace != "kshard-demo" || doc.Exists == nil || !*doc.Exists || stderr != "" {
		t.Errorf("owner configmaps widget-0000 -n kshard-demo = %+v, stderr %q", doc, stderr)
	}
	// Leases elsewhere, named.
	doc, stderr = owner("cm", "cm", "-n", "team-a", "--lease-namespace", "operators")
	if doc.Key != "team-a/cm" || doc.Namespace != "operators" || doc.Resource != "configmaps" || doc.Owner == "" ||
		len(doc.Labels) != 1 || doc.Labels[0].Key != label || !doc.Labels[0].Current || stderr != "" {
		t.Errorf("owner cm cm -n team-a --lease-namespace operators = %+v, stderr %q", doc, stderr)
	}
	// The earlier form: the object's namespace in the reference, -n the
	// Leases'. Same answer, and a warning naming --lease-namespace.
	old, stderr := owner("configmaps", "team-a/cm", "-n", "operators")
	if mustJSON(t, old) != mustJSON(t, doc) {
		t.Errorf("owner configmaps team-a/cm -n operators = %+v, want %+v", old, doc)
	}
	if !strings.HasPrefix(stderr, "warning: -n operators is read as the Leases' namespace") || !strings.Contains(stderr, "write --lease-namespace operators") {
		t.Errorf("the earlier form's warning: %q", stderr)
	}
	// A cluster-scoped object: -n names only the Leases' namespace.
	doc, _ = owner("namespaces", "team-a", "-n", "operators")
	if doc.Key != "team-a" || doc.Namespace != "operators" || doc.Exists == nil || !*doc.Exists {
		t.Errorf("owner namespaces team-a -n operators = %+v", doc)
	}

	// Two namespaces hold ring ops, none of them team-a: which one is
	// not guessed.
	code, _, stderr := run(t, "owner", "configmaps", "cm", "-n", "team-a", "--kubeconfig", kc)
	if code != 1 {
		t.Errorf("ring in two namespaces: exit %d, want 1", code)
	}
	oneLineErr(t, stderr, `no kshard ring in namespace "team-a"`, "ring ops in namespace kshard-demo, ring ops in namespace operators", "pass --lease-namespace")

	// One namespace holds it: that one is used, and the table names it.
	kc = (&fakeCluster{leases: ringIn(t, "operators"), objects: f.objects}).serve(t)
	code, out, stderr := run(t, "owner", "configmaps", "cm", "-n", "team-a", "--kubeconfig", kc, "-o", "wide")
	if code != 0 || stderr != "" {
		t.Fatalf("found ring: code %d stderr %q", code, stderr)
	}
	for _, want := range []string{"OBJECT      configmaps team-a/cm (exists)", "RING        ops in namespace operators", "PARAMS      xx1-p271", "LEASE       ops-"} {
		if !strings.Contains(out, want) {
			t.Errorf("owner -o wide lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = run(t, "owner", "configmaps", "cm", "-n", "team-a", "--kubeconfig", kc)
	if code != 0 || strings.Contains(out, "PARAMS") || strings.Contains(out, "LEASE ") {
		t.Errorf("the default owner table has -o wide's rows: code %d\n%s", code, out)
	}
	code, out, _ = run(t, "owner", "configmaps", "cm", "-n", "team-a", "--kubeconfig", kc, "-o", "yaml")
	var y ownerDoc
	if code != 0 || yaml.Unmarshal([]byte(out), &y) != nil || y.Key != "team-a/cm" || y.Namespace != "operators" || !strings.Contains(out, "claimedBy:") {
		t.Errorf("owner -o yaml: code %d, %+v\n%s", code, y, out)
	}
	// An explicit --lease-namespace is not second-guessed.
	code, _, stderr = run(t, "owner", "configmaps", "cm", "-n", "team-a", "--lease-namespace", "team-a", "--kubeconfig", kc)
	if code != 1 {
		t.Errorf("--lease-namespace team-a: exit %d, want 1", code)
	}
	oneLineErr(t, stderr, `no kshard ring in namespace "team-a"`, "found: ring ops in namespace operators")
}

// unlabel's check for labelling replicas reads the ring's Leases in the
// Leases' namespace, and, when that was only defaulted and holds none,
// in every namespace.
func TestUnlabelFindsLabellingReplicas(t *testing.T) {
	labelling := ringIn(t, "operators")
	for i := range labelling {
		labelling[i].Annotations[membership.AnnotationCacheMode], labelling[i].Annotations[membership.AnnotationCachedObjects] = "labels", "10"
	}
	f := newFakeLeases(t, labelling...)
	check := func(leaseNS string, given bool) error {
		c := &cluster{config: &rest.Config{Host: "https://fake"}, client: f, namespace: "team-a", leaseNamespace: leaseNS, leaseNamespaceGiven: given}
		var warnings strings.Builder
		err := c.refuseWhileLabelling(context.Background(), &warnings, "ops", "")
		if warnings.Len() > 0 {
			t.Logf("warnings: %s", warnings.String())
		}
		return err
	}
	if err := check("operators", true); err == nil || !strings.Contains(err.Error(), "a in namespace operators, b in namespace operators") {
		t.Errorf("Leases in --lease-namespace: %v, want a refusal naming both replicas", err)
	}
	if err := check("team-a", false); err == nil || !strings.Contains(err.Error(), "cache mode labels") {
		t.Errorf("Leases elsewhere, --lease-namespace not given: %v, want a refusal", err)
	}
	// Named explicitly, an empty namespace is taken at its word.
	if err := check("team-a", true); err != nil {
		t.Errorf("--lease-namespace team-a (no Lease there): %v", err)
	}
}

// singleDashFlag matches a long flag written with one dash (-namespace),
// which pflag would read as a run of short flags.
var singleDashFlag = regexp.MustCompile(`(^|[\s(\[|,'])-[a-zA-Z][a-zA-Z-]+`)

// Every help text writes long flags with two dashes, and each command that
// takes the namespace flags documents them the same way.
func TestHelpWritesFlagsAsKubectl(t *testing.T) {
	helps := map[string]string{}
	_, helps["kshard"], _ = run(t, "--help")
	for _, c := range commands() {
		code, out, stderr := run(t, c.name, "--help")
		if code != 0 || stderr != "" {
			t.Fatalf("%s --help: code %d stderr %q", c.name, code, stderr)
		}
		helps[c.name] = out
		if c.globals {
			for _, want := range []string{"-n, --namespace NS", "-A, --all-namespaces", "--lease-namespace NS", "-o, --output FORMAT", "wide", "json or yaml"} {
				if !strings.Contains(out, want) {
					t.Errorf("%s --help lacks %q", c.name, want)
				}
			}
		}
	}
	for name, help := range helps {
		for _, line := range strings.Split(help, "\n") {
			if m := singleDashFlag.FindString(line); m != "" {
				t.Errorf("%s --help writes a long flag with one dash (%q) in: %s", name, strings.TrimSpace(m), line)
			}
		}
	}
}

func TestParseNamespaceFlags(t *testing.T) {
	g := &globals{}
	fs := newFlagSet("x")
	g.register(fs)
	pos, err := parseInterspersed(fs, []string{"widgets", "-A", "w", "--lease-namespace=ops", "-n", "team-a", "-o", "yaml"})
	if err != nil {
		t.Fatal(err)
	}
	g.noteSet(fs)
	if strings.Join(pos, " ") != "widgets w" || !g.allNamespaces || g.leaseNamespace != "ops" || g.namespace() != "team-a" || g.output != outputYAML || !g.structured() {
		t.Errorf("pos %v, globals %+v", pos, g)
	}
	if err := g.validate(); err != nil {
		t.Errorf("validate: %v", err)
	}
	// The Leases' namespace defaults to -n's, else the context's.
	for _, tc := range []struct {
		lease, ns, want string
		given           bool
	}{{"", "team-a", "team-a", false}, {"ops", "team-a", "ops", true}} {
		c := newCluster(&rest.Config{}, nil, tc.ns, &globals{leaseNamespace: tc.lease})
		if c.namespace != tc.ns || c.leaseNamespace != tc.want || c.leaseNamespaceGiven != tc.given {
			t.Errorf("--lease-namespace %q with namespace %q: %+v", tc.lease, tc.ns, c)
		}
	}
}

// The deprecated --object-namespace still works, with a warning naming
// what replaces it.
func TestUnlabelObjectNamespaceDeprecated(t *testing.T) {
	missing := t.TempDir() + "/missing"
	code, _, stderr := run(t, "unlabel", "--ring", "ops", "widgets", "--object-namespace", "a,b", "--kubeconfig", missing)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if code != 1 || len(lines) != 2 || !strings.Contains(lines[0], "warning: --object-namespace is deprecated: give the objects' namespace with -n") ||
		!strings.Contains(lines[1], "--kubeconfig "+missing) {
		t.Errorf("code %d, stderr %q; want the deprecation warning, then the kubeconfig error", code, stderr)
	}
}
