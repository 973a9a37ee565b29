package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kshard/kshard/internal/assign"
	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/shard"
)

// run runs Main in-process and returns exit code, stdout and stderr.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Main(append([]string{"kshard"}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// oneLineErr asserts the error output is exactly one line containing want.
func oneLineErr(t *testing.T, stderr string, want ...string) {
	t.Helper()
	if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("stderr is not one line: %q", stderr)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr %q does not contain %q", stderr, w)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{nil, []string{"kshard: missing command", "kshard --help"}},
		{[]string{"frob"}, []string{`unknown command "frob"`}},
		{[]string{"--frob", "status"}, []string{"unknown flag --frob"}},
		{[]string{"status", "--bogus"}, []string{"kshard status: unknown flag --bogus", "kshard status --help"}},
		{[]string{"status", "-x"}, []string{"unknown flag -x"}},
		{[]string{"status", "-o", "xml"}, []string{`-o "xml"`, "-o wide, -o json or -o yaml"}},
		{[]string{"status", "--output=name"}, []string{`-o "name"`}},
		{[]string{"status", "-A", "-n", "ops"}, []string{"-A shows the rings of every namespace, --namespace names one"}},
		{[]string{"-A", "status", "--lease-namespace", "ops"}, []string{"-A shows the rings of every namespace, --lease-namespace names one"}},
		{[]string{"status", "--lease-namespace", ""}, []string{"--lease-namespace is empty"}},
		{[]string{"status", "--lease-namespace"}, []string{"flag --lease-namespace needs a value"}},
		{[]string{"status", "--lease-namespace", "Ops_NS"}, []string{`--lease-namespace "Ops_NS" is not a namespace name`}},
		{[]string{"status", "-n", "Ops_NS"}, []string{`-n/--namespace "Ops_NS" is not a namespace name`}},
		{[]string{"status", "--all-namespaces=maybe"}, []string{`invalid value "maybe" for --all-namespaces`}},
		{[]string{"status", "-n"}, []string{"flag -n needs a value"}},
		{[]string{"status", "-n", ""}, []string{"namespace is empty"}},
		{[]string{"status", "extra"}, []string{`status takes no arguments, got ["extra"]`}},
		{[]string{"owner"}, []string{"kshard owner: want <resource> <name> (with -n for its namespace) or <resource> <namespace>/<name>", "got 0 argument(s)"}},
		{[]string{"owner", "widgets"}, []string{"got 1 argument(s)"}},
		{[]string{"owner", "widgets", "a/b", "c"}, []string{"got 3 argument(s)"}},
		{[]string{"owner", "widgets", "a/b/c"}, []string{`"a/b/c" is not <name> or <namespace>/<name>`}},
		{[]string{"owner", "widgets", "w", "-A"}, []string{"-A/--all-namespaces does not apply to owner", "give its namespace with -n"}},
		{[]string{"owner", "widgets", "a/w", "-n", "b", "--lease-namespace", "c"}, []string{"-n b names neither the object (a/w names its namespace) nor the Leases"}},
		{[]string{"owner", "widgets", "/b"}, []string{`"/b" is not`}},
		{[]string{"owner", "widgets", "Bad_NS/b"}, []string{`"Bad_NS/b" is not`}},
		{[]string{"owner", "widgets", "a/"}, []string{`"a/" is not`}},
		{[]string{"release", "a"}, []string{"kshard release: release needs --ring", "kshard release --help"}},
		{[]string{"release", "--ring", "ops"}, []string{"give the identities of the Leases to release, or --all"}},
		{[]string{"release", "--ring", "ops", "--all", "a"}, []string{"give identities or --all, not both"}},
		{[]string{"release", "--ring", "ops", "a", "--wait", "0s"}, []string{"--wait 0s: give a positive duration"}},
		{[]string{"release", "--ring", "ops", "a", "--wait", "soon"}, []string{`invalid value "soon" for --wait`}},
		{[]string{"release", "--ring", "ops", "a", "--wait", "1s", "--force"}, []string{"--wait and --force contradict each other"}},
		{[]string{"release", "--ring", "ops", "A_B"}, []string{`not a valid identity: "A_B" is not a DNS-1123 subdomain`}},
		{[]string{"release", "--ring", "ops", strings.Repeat("a", 252)}, []string{"shorten the ring name or the identity"}},
		{[]string{"release", "--ring", "Not A Ring!", "a"}, []string{"not a valid ring name"}},
		{[]string{"release", "--ring", "ops", "a", "-o", "xml"}, []string{`-o "xml"`}},
		{[]string{"release", "--ring", "ops", "a", "-A"}, []string{"-A/--all-namespaces does not apply to release", "--lease-namespace"}},
		{[]string{"demo", "--timeout", "abc"}, []string{`invalid value "abc" for --timeout`, "90s or 10m"}},
		{[]string{"demo", "--timeout=-1s"}, []string{"--timeout -1s", "positive"}},
		{[]string{"demo", "--replicas", "x"}, []string{`invalid value "x" for --replicas`, "whole number"}},
		{[]string{"demo", "--replicas", "1"}, []string{"--replicas 1", "2 to 16"}},
		{[]string{"demo", "--objects", "0"}, []string{"--objects 0"}},
		{[]string{"demo", "-n", "x"}, []string{"unknown flag -n"}},
		{[]string{"-n", "x", "demo"}, []string{"flag --namespace does not apply to demo"}},
		{[]string{"-A", "demo"}, []string{"flag --all-namespaces does not apply to demo"}},
		{[]string{"--lease-namespace", "x", "version"}, []string{"flag --lease-namespace does not apply to version"}},
		{[]string{"demo", "now"}, []string{"demo takes no arguments"}},
		{[]string{"demo", "--cache-mode", "server"}, []string{`--cache-mode "server"`, "labels or full"}},
		{[]string{"version", "--short"}, []string{"unknown flag --short"}},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := run(t, tc.args...)
			if code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want none", stdout)
			}
			oneLineErr(t, stderr, tc.want...)
		})
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"status", "--help"}, {"owner", "-h"}, {"demo", "--help"},
		{"version", "--help"}, {"help", "owner"}, {"release", "--help"}, {"help", "release"}, {"-n", "x", "status", "--help"}} {
		code, stdout, stderr := run(t, args...)
		if code != 0 || stderr != "" || !strings.Contains(stdout, "Usage:") {
			t.Errorf("%v: code %d, stderr %q, stdout %q", args, code, stderr, stdout)
		}
	}
	_, stdout, _ := run(t, "status", "--help")
	if !strings.Contains(stdout, "observed a") || !strings.Contains(stdout, "-n, --namespace") {
		t.Errorf("status help does not explain liveness or list the flags:\n%s", stdout)
	}
	_, stdout, _ = run(t, "release", "--help")
	for _, want := range []string{"release --ring NAME <identity>...", "stays terminating for ever", "--force skips the wait", "--wait D", "-n, --namespace"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("release help does not contain %q:\n%s", want, stdout)
		}
	}
	_, stdout, _ = run(t, "--help")
	if !strings.Contains(stdout, "  release ") {
		t.Errorf("help does not list release:\n%s", stdout)
	}
}

func TestProgName(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Main([]string{"/usr/local/bin/kubectl-shard", "status", "--bogus"}, &stdout, &stderr)
	if code != 2 || !strings.HasPrefix(stderr.String(), "kubectl shard status: unknown flag --bogus (see 'kubectl shard status --help')") {
		t.Errorf("code %d stderr %q", code, stderr.String())
	}
	stdout.Reset()
	Main([]string{"kubectl-shard", "--help"}, &stdout, &stderr)
	if !strings.Contains(stdout.String(), "kubectl shard <command>") {
		t.Errorf("help does not say kubectl shard:\n%s", stdout.String())
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, stdout, stderr := run(t, args...)
		if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "kshard ") {
			t.Errorf("%v: code %d stdout %q stderr %q", args, code, stdout, stderr)
		}
	}
}

func TestParseInterspersed(t *testing.T) {
	g := &globals{}
	fs := newFlagSet("x")
	g.register(fs)
	pos, err := parseInterspersed(fs, []string{"widgets", "-n", "ops", "a/b", "--ring=r", "--", "-o"})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(pos) != "[widgets a/b -o]" || g.namespace() != "ops" || g.ring != "r" || g.output != "table" {
		t.Errorf("pos %v, globals %+v", pos, g)
	}
}

func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: %s
contexts:
- name: c
  context:
    cluster: c
    user: u
    namespace: from-context
current-context: c
users:
- name: u
  user:
    token: t
`, server)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestKubeconfigErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	code, _, stderr := run(t, "status", "--kubeconfig", missing)
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	oneLineErr(t, stderr, "--kubeconfig "+missing, "pass the path of a kubeconfig")

	garbage := filepath.Join(t.TempDir(), "garbage")
	os.WriteFile(garbage, []byte("{{{ not yaml"), 0o600)
	code, _, stderr = run(t, "owner", "widgets", "a/b", "--kubeconfig", garbage)
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	oneLineErr(t, stderr, "loading kubeconfig")

	// Nothing listens on port 1: the connection is refused at once.
	refused := writeKubeconfig(t, "https://127.0.0.1:1")
	code, _, stderr = run(t, "status", "--kubeconfig", refused)
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	oneLineErr(t, stderr, "kshard status:", "cannot reach the API server at https://127.0.0.1:1", "check that the cluster is up")

	code, _, stderr = run(t, "status", "--kubeconfig", refused, "--context", "nope")
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	oneLineErr(t, stderr, "nope")
}

// fakeAPI serves a LeaseList for the namespace ns (and an empty list or 404
// for anything else), like the API server would.
func fakeAPI(t *testing.T, ns string, leases []coordinationv1.Lease, status int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case status != http.StatusOK:
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status: "Failure", Code: int32(status), Reason: metav1.StatusReasonForbidden, Message: "leases is forbidden"})
		case r.URL.Path == "/apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases":
			json.NewEncoder(w).Encode(coordinationv1.LeaseList{TypeMeta: metav1.TypeMeta{Kind: "LeaseList", APIVersion: "coordination.k8s.io/v1"}, Items: leases})
		case r.URL.Path == "/api/v1/namespaces/"+ns || r.URL.Path == "/api/v1/namespaces/empty":
			json.NewEncoder(w).Encode(corev1.Namespace{TypeMeta: metav1.TypeMeta{Kind: "Namespace", APIVersion: "v1"},
				ObjectMeta: metav1.ObjectMeta{Name: filepath.Base(r.URL.Path)}})
		case strings.HasSuffix(r.URL.Path, "/leases"):
			json.NewEncoder(w).Encode(coordinationv1.LeaseList{TypeMeta: metav1.TypeMeta{Kind: "LeaseList", APIVersion: "coordination.k8s.io/v1"}})
		default:
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status: "Failure", Code: 404, Reason: metav1.StatusReasonNotFound})
		}
	}))
	t.Cleanup(srv.Close)
	return writeKubeconfig(t, srv.URL)
}

func member(id, state string, claim shard.PartitionSet) coordinationv1.Lease {
	holder := id
	secs := int32(10)
	renew := metav1.NewMicroTime(time.Now().Add(-time.Second))
	return coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "ops-" + id, Namespace: "from-context",
			Labels: map[string]string{lease.LabelRing: "ops", membership.LabelState: state},
			Annotations: map[string]string{membership.AnnotationClaim: membership.EncodeClaim(claim), membership.AnnotationIncarnation: "i-" + id,
				membership.AnnotationGeneration: "1", membership.AnnotationParams: shard.Config{}.Fingerprint()}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &renew},
	}
}

func TestStatusAgainstFakeAPI(t *testing.T) {
	ring, err := assign.New(shard.Config{}, []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	// b's sharded cache holds all of its target but three partitions: it
	// is still listing them. a publishes no warm set (a full cache).
	b := member("b", "active", ring.Partitions("b").Union(shard.NewPartitionSet(271, 0, 1, 2)))
	warm := ring.Partitions("b").Difference(shard.NewPartitionSet(271, ring.Partitions("b").Slice()[:3]...))
	b.Annotations[membership.AnnotationWarm] = membership.EncodeClaim(warm)
	b.Annotations[membership.AnnotationCacheMode], b.Annotations[membership.AnnotationCachedObjects] = "labels", "48213"
	kc := fakeAPI(t, "from-context", []coordinationv1.Lease{member("a", "active", ring.Partitions("a")), b}, http.StatusOK)

	code, stdout, stderr := run(t, "status", "--kubeconfig", kc)
	if code != 0 || stderr != "" {
		t.Fatalf("code %d stderr %q", code, stderr)
	}
	for _, want := range []string{"RING ops  namespace from-context  partitions 271", "members 2 (live and active) of 2 Leases",
		"IDENTITY", "WARM", "CACHE", "OBJECTS", "a  ", "active", "live"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table does not contain %q:\n%s", want, stdout)
		}
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(stdout, "\n") {
		if f := strings.Fields(line); len(f) > 4 { // IDENTITY STATE PARTITIONS TARGET WARM …
			rows[f[0]] = f
		}
	}
	if got, want := rows["a"][4], "-"; got != want {
		t.Errorf("a's WARM column %q, want %q (no warm set):\n%s", got, want, stdout)
	}
	if got, want := rows["b"][4], strconv.Itoa(warm.Len()); got != want {
		t.Errorf("b's WARM column %q, want %q:\n%s", got, want, stdout)
	}
	// a publishes no cache status (an older kshard): "-", not 0.
	if got := strings.Join(rows["a"][5:7], " "); got != "- -" {
		t.Errorf("a's CACHE and OBJECTS columns %q, want \"- -\":\n%s", got, stdout)
	}
	if got := strings.Join(rows["b"][5:7], " "); got != "labels 48213" {
		t.Errorf("b's CACHE and OBJECTS columns %q, want \"labels 48213\":\n%s", got, stdout)
	}

	code, stdout, stderr = run(t, "-o", "json", "status", "--kubeconfig", kc)
	if code != 0 || stderr != "" {
		t.Fatalf("code %d stderr %q", code, stderr)
	}
	var doc struct {
		Namespace string `json:"namespace"`
		Rings     []struct {
			Name, Params          string
			Partitions            int
			RingMembers           []string
			Unclaimed             int
			Overlapping           int
			OverlappingPartitions []int
			Malformed             int
			Members               []struct {
				Identity, State, Health, Incarnation string
				Partitions                           int
				RenewAgeSeconds                      float64
				CacheMode                            string
				CachedObjects                        *int
			}
		}
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	r := doc.Rings[0]
	wantOverlap := shard.NewPartitionSet(271, 0, 1, 2).Intersect(ring.Partitions("a")).Len()
	if doc.Namespace != "from-context" || r.Name != "ops" || r.Partitions != 271 || len(r.RingMembers) != 2 ||
		r.Unclaimed != 0 || r.Overlapping != wantOverlap || len(r.Members) != 2 || r.Members[0].Health != "live" {
		t.Errorf("status JSON = %+v", doc)
	}
	if a, b := r.Members[0], r.Members[1]; a.CacheMode != "" || a.CachedObjects != nil || b.CacheMode != "labels" || b.CachedObjects == nil || *b.CachedObjects != 48213 {
		t.Errorf("status JSON cache fields: a %q %v, b %q %v; want a absent, b labels 48213", a.CacheMode, a.CachedObjects, b.CacheMode, b.CachedObjects)
	}
	if strings.Count(stdout, `"cachedObjects"`) != 1 {
		t.Errorf("JSON should carry cachedObjects for b only:\n%s", stdout)
	}
	if wantOverlap > 0 && !strings.Contains(stdout, `"overlappingPartitions": [`) {
		t.Errorf("JSON lacks overlappingPartitions")
	}
}

// A member run with another partition count is reported once, as a
// foreign configuration naming the difference, and not as malformed.
func TestStatusForeignConfiguration(t *testing.T) {
	ring, err := assign.New(shard.Config{}, []string{"a", "c"})
	if err != nil {
		t.Fatal(err)
	}
	foreign := member("b", "active", shard.FullPartitionSet(1021))
	foreign.Annotations[membership.AnnotationParams] = shard.Config{Partitions: 1021}.Fingerprint()
	kc := fakeAPI(t, "from-context", []coordinationv1.Lease{
		member("a", "active", ring.Partitions("a")), foreign, member("c", "active", ring.Partitions("c")),
	}, http.StatusOK)

	code, stdout, stderr := run(t, "status", "--kubeconfig", kc)
	if code != 0 || stderr != "" {
		t.Fatalf("code %d stderr %q", code, stderr)
	}
	for _, want := range []string{"malformed 0  foreign 1", "foreign configuration: Lease ops-b runs params xx1-p1021-l1.05-r40 (partitions 1021, not 271)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table does not contain %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "malformed Lease") {
		t.Errorf("the foreign Lease is reported as malformed:\n%s", stdout)
	}
}

func TestStatusNoRing(t *testing.T) {
	kc := fakeAPI(t, "from-context", nil, http.StatusOK)
	code, _, stderr := run(t, "status", "--kubeconfig", kc, "-n", "empty")
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	oneLineErr(t, stderr, `no kshard ring in namespace "empty"`, "pass --lease-namespace")

	code, _, stderr = run(t, "status", "--kubeconfig", kc, "-n", "missing")
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	oneLineErr(t, stderr, `namespace "missing" does not exist`, "pass --lease-namespace")

	code, _, stderr = run(t, "status", "--kubeconfig", kc, "--ring", "nope")
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	oneLineErr(t, stderr, `ring "nope" has no Lease in namespace "from-context"`)

	code, _, stderr = run(t, "status", "--kubeconfig", kc, "--ring", "Not A Ring!")
	if code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	oneLineErr(t, stderr, "not a valid ring name")
}

func TestStatusForbidden(t *testing.T) {
	kc := fakeAPI(t, "from-context", nil, http.StatusForbidden)
	code, _, stderr := run(t, "status", "--kubeconfig", kc)
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	oneLineErr(t, stderr, "forbidden", "kubectl auth can-i list leases -n from-context")
}

func TestRanges(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{
		{nil, ""}, {[]int{4}, "4"}, {[]int{0, 1, 2, 5, 7, 8}, "0-2,5,7-8"},
	} {
		if got := ranges(tc.in); got != tc.want {
			t.Errorf("ranges(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
	var many []int
	for i := 0; i < 100; i += 2 {
		many = append(many, i)
	}
	if got := ranges(many); !strings.Contains(got, "(50 partitions in all)") {
		t.Errorf("ranges(many) = %q", got)
	}
}
