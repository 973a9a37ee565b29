package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kshard/kshard/cmd/example-operator/api/v1alpha1"
	"github.com/kshard/kshard/internal/process"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
)

const (
	namespace = "cli-e2e"
	ring      = "example-operator"
	widgets   = 40
)

var widgetGVR = schema.GroupVersionResource{Group: "demo.kshard.io", Version: "v1alpha1", Resource: "widgets"}

// statusDoc is the part of `kshard status -o json` the test reads.
type statusDoc struct {
	Namespace string `json:"namespace"`
	Rings     []struct {
		Name        string   `json:"name"`
		Namespace   string   `json:"namespace"`
		Partitions  int      `json:"partitions"`
		Params      string   `json:"params"`
		RingMembers []string `json:"ringMembers"`
		Unclaimed   int      `json:"unclaimed"`
		Overlapping int      `json:"overlapping"`
		Malformed   int      `json:"malformed"`
		Members     []struct {
			Identity      string `json:"identity"`
			State         string `json:"state"`
			Health        string `json:"health"`
			Partitions    int    `json:"partitions"`
			Target        int    `json:"target"`
			Incarnation   string `json:"incarnation"`
			CacheMode     string `json:"cacheMode"`
			CachedObjects *int   `json:"cachedObjects"`
		} `json:"members"`
	} `json:"rings"`
}

// ownerDoc is `kshard owner -o json`.
type ownerDoc struct {
	Resource  string   `json:"resource"`
	Exists    *bool    `json:"exists"`
	Key       string   `json:"key"`
	Partition int      `json:"partition"`
	Owner     string   `json:"owner"`
	ClaimedBy []string `json:"claimedBy"`
	Handoff   bool     `json:"handoff"`
	// PartitionLabels are the ring's labels on the object.
	PartitionLabels []struct {
		Key       string `json:"key"`
		Value     string `json:"value"`
		Current   bool   `json:"current"`
		Partition *int   `json:"partition"`
	} `json:"partitionLabels"`
}

// TestStatusAndOwnerMatchReconciles runs three example-operator replicas
// with the gate-free sharded cache (--cache-mode labels) on a control plane
// without the feature gate, and checks that `kshard owner` names, for every
// Widget, the replica that reconciled it (status.reconciledBy) and the
// partition label it carries, and that `kshard status` shows the ring they
// formed and each replica's share of the cached objects.
func TestStatusAndOwnerMatchReconciles(t *testing.T) {
	skipIfShort(t)
	cp := controlplane.ForTest(t, controlplane.Options{})
	kc := cp.KubeconfigPath()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	client := kubernetes.NewForConfigOrDie(cp.Config())
	dyn := dynamic.NewForConfigOrDie(cp.Config())
	installCRD(t, ctx, dyn)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range widgets {
		w := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "demo.kshard.io/v1alpha1", "kind": "Widget",
			"metadata": map[string]any{"name": fmt.Sprintf("w-%02d", i), "namespace": namespace},
			"spec":     map[string]any{"color": "red", "size": int64(i)},
		}}
		if _, err := dyn.Resource(widgetGVR).Namespace(namespace).Create(ctx, w, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// Bad input against a live cluster first: no ring yet.
	r := kshard(t, time.Minute, "status", "--kubeconfig", kc, "-n", namespace)
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, `no kshard ring in namespace "cli-e2e"`) {
		t.Errorf("status without a ring: code %d, stderr %q", r.code, r.stderr)
	}

	ids := []string{"op-0", "op-1", "op-2"}
	for _, id := range ids {
		startReplica(t, kc, id)
	}

	// Await the ring as the CLI sees it: three live active members, every
	// partition claimed once.
	var status statusDoc
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(context.Context) (bool, error) {
		r := kshard(t, time.Minute, "status", "-o", "json", "--kubeconfig", kc, "-n", namespace)
		if r.code != 0 {
			return false, nil // no Lease yet
		}
		status = statusDoc{}
		if err := json.Unmarshal([]byte(r.stdout), &status); err != nil {
			return false, fmt.Errorf("status -o json is not JSON: %v\n%s", err, r.stdout)
		}
		rg := status.Rings[0]
		settled := true
		for _, m := range rg.Members {
			settled = settled && m.Target == m.Partitions
		}
		return len(rg.RingMembers) == 3 && settled && rg.Unclaimed == 0 && rg.Overlapping == 0, nil
	})
	if err != nil {
		t.Fatalf("ring did not form as status shows it: %v (last: %+v)", err, status)
	}
	rg := status.Rings[0]
	total := 0
	for _, m := range rg.Members {
		if m.State != "active" || m.Health != "live" || m.Incarnation == "" || m.Target != m.Partitions {
			t.Errorf("member %+v", m)
		}
		total += m.Partitions
	}
	if status.Namespace != namespace || rg.Name != ring || rg.Partitions != 271 || total != 271 || rg.Malformed != 0 || rg.Params == "" {
		t.Errorf("status = %+v", status)
	}
	// Each replica caches its share: the counts in the Leases, refreshed
	// with the renewals, add up to every Widget and ConfigMap once.
	var shares []int
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		cms, err := client.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		r := kshard(t, time.Minute, "status", "-o", "json", "--kubeconfig", kc, "-n", namespace)
		var doc statusDoc
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil {
			return false, nil
		}
		shares, total = nil, 0
		for _, m := range doc.Rings[0].Members {
			if m.CacheMode != "labels" || m.CachedObjects == nil {
				return false, nil
			}
			shares = append(shares, *m.CachedObjects)
			total += *m.CachedObjects
		}
		return len(shares) == 3 && total == widgets+len(cms.Items) && !slices.Contains(shares, 0), nil
	})
	if err != nil {
		t.Fatalf("the replicas' cached objects do not add up to every object once: %v (last: %v)", err, shares)
	}
	t.Logf("cached objects per replica: %v", shares)
	if r := kshard(t, time.Minute, "status", "--kubeconfig", kc, "-n", namespace); r.code != 0 || !strings.Contains(r.stdout, "CACHE") || !strings.Contains(r.stdout, "labels") {
		t.Errorf("status table lacks the cache columns: code %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Every Widget gets its partition label, written once by its owner.
	err = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := dyn.Resource(widgetGVR).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: ring + ".kshard.io/xx1-key-p271"})
		return err == nil && len(list.Items) == widgets, nil
	})
	if err != nil {
		t.Fatalf("the Widgets were not all labelled: %v", err)
	}

	// The ring is stable now, so owners are fixed: ask once per Widget.
	owners := map[string]string{}
	for i := range widgets {
		name := fmt.Sprintf("w-%02d", i)
		r := kshard(t, time.Minute, "owner", "widgets", namespace+"/"+name, "-o", "json", "--kubeconfig", kc, "-n", namespace)
		if r.code != 0 {
			t.Fatalf("owner %s: code %d, stderr %s", name, r.code, r.stderr)
		}
		var o ownerDoc
		if err := json.Unmarshal([]byte(r.stdout), &o); err != nil {
			t.Fatalf("owner -o json is not JSON: %v\n%s", err, r.stdout)
		}
		if o.Resource != "widgets.demo.kshard.io" || o.Exists == nil || !*o.Exists || o.Key != namespace+"/"+name ||
			o.Handoff || len(o.ClaimedBy) != 1 || o.ClaimedBy[0] != o.Owner {
			t.Errorf("owner %s = %+v", name, o)
		}
		if l := o.PartitionLabels; len(l) != 1 || l[0].Key != ring+".kshard.io/xx1-key-p271" || !l[0].Current || l[0].Partition == nil || *l[0].Partition != o.Partition {
			t.Errorf("owner %s: partition labels %+v, want the ring's label naming partition %d", name, l, o.Partition)
		}
		owners[name] = o.Owner
	}

	// Replicas re-reconcile the Widgets of partitions they take over, so
	// reconciledBy converges on the owner once the ring is stable.
	var mismatch []string
	err = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := dyn.Resource(widgetGVR).Namespace(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		mismatch = nil
		for _, w := range list.Items {
			by, _, _ := unstructured.NestedString(w.Object, "status", "reconciledBy")
			if by != owners[w.GetName()] {
				mismatch = append(mismatch, fmt.Sprintf("%s reconciled by %q, owner %q", w.GetName(), by, owners[w.GetName()]))
			}
		}
		return len(mismatch) == 0, nil
	})
	if err != nil {
		t.Fatalf("reconciledBy does not match kshard owner: %v\n%s", err, strings.Join(mismatch, "\n"))
	}
	used := map[string]bool{}
	for _, o := range owners {
		used[o] = true
	}
	if len(used) < 2 {
		t.Errorf("all %d Widgets are owned by %v: sharding did not spread them", widgets, used)
	}

	// kubectl's form, <name> -n NS, with the Leases in the same namespace
	// (found there, as -n is also the Leases' namespace by default): the
	// same answer, in YAML.
	r = kshard(t, time.Minute, "owner", "widgets", "w-00", "-n", namespace, "-o", "yaml", "--kubeconfig", kc)
	var oy ownerDoc
	if r.code != 0 || r.stderr != "" || sigsyaml.Unmarshal([]byte(r.stdout), &oy) != nil || oy.Owner != owners["w-00"] || oy.Key != namespace+"/w-00" ||
		oy.Exists == nil || !*oy.Exists || len(oy.PartitionLabels) != 1 {
		t.Errorf("owner widgets w-00 -n %s -o yaml: code %d, %+v\n%s%s", namespace, r.code, oy, r.stdout, r.stderr)
	}
	// Every namespace's rings: this one, under its namespace.
	r = kshard(t, time.Minute, "status", "-A", "-o", "yaml", "--kubeconfig", kc)
	var all statusDoc
	if r.code != 0 || sigsyaml.Unmarshal([]byte(r.stdout), &all) != nil || all.Namespace != "" || len(all.Rings) != 1 ||
		all.Rings[0].Name != ring || all.Rings[0].Namespace != namespace || len(all.Rings[0].RingMembers) != 3 {
		t.Errorf("status -A -o yaml: code %d, %+v\n%s%s", r.code, all, r.stdout, r.stderr)
	}
	r = kshard(t, time.Minute, "status", "--all-namespaces", "-o", "wide", "--kubeconfig", kc)
	if r.code != 0 || !strings.Contains(r.stdout, "RING "+ring+"  namespace "+namespace) || !strings.Contains(r.stdout, "INCARNATION") ||
		!strings.Contains(r.stdout, ring+"-op-1") {
		t.Errorf("status -A -o wide: code %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// The table form, an object that does not exist, and bad input.
	r = kshard(t, time.Minute, "owner", "widget", namespace+"/w-00", "--kubeconfig", kc, "-n", namespace)
	if r.code != 0 || !strings.Contains(r.stdout, "OWNER       "+owners["w-00"]) || !strings.Contains(r.stdout, "(exists)") ||
		!strings.Contains(r.stdout, "LABEL       "+ring+".kshard.io/xx1-key-p271=") || !strings.Contains(r.stdout, "its key's") {
		t.Errorf("owner table: code %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = kshard(t, time.Minute, "owner", "widgets", namespace+"/nope", "--kubeconfig", kc, "-n", namespace)
	if r.code != 0 || !strings.Contains(r.stdout, "not found: this is where it would be reconciled") {
		t.Errorf("owner of a missing object: code %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, bad := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"owner", "namespaces", "default/x"}, 2, "namespaces are cluster-scoped"},
		{[]string{"owner", "gizmos", "a/b"}, 1, `the API server has no resource "gizmos"`},
		{[]string{"owner", "widgets", "a/b", "--ring", "other"}, 1, `rings here: example-operator: pass one with --ring`},
		{[]string{"owner", "widgets", "w-00", "-A"}, 2, "-A/--all-namespaces does not apply to owner"},
	} {
		r := kshard(t, time.Minute, append(bad.args, "--kubeconfig", kc, "-n", namespace)...)
		if r.code != bad.code || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, bad.want) {
			t.Errorf("%v: code %d (want %d), stderr %q (want %q)", bad.args, r.code, bad.code, r.stderr, bad.want)
		}
	}
}

// TestUnreachableAPIServer: a kubeconfig whose server does not answer gives
// one line that says what to check, and a non-zero exit.
func TestUnreachableAPIServer(t *testing.T) {
	skipIfShort(t)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
users: [{name: u, user: {token: t}}]
`), 0o600)
	for _, args := range [][]string{{"status"}, {"owner", "widgets", "a/b"}} {
		r := kshard(t, time.Minute, append(args, "--kubeconfig", kc)...)
		if r.code == 0 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "https://127.0.0.1:1") {
			t.Errorf("%v: code %d, stderr %q", args, r.code, r.stderr)
		}
	}
	r := kshard(t, time.Minute, "status", "--kubeconfig", filepath.Join(t.TempDir(), "missing"))
	if r.code == 0 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "--kubeconfig") {
		t.Errorf("missing kubeconfig: code %d, stderr %q", r.code, r.stderr)
	}
}

// startReplica runs one example-operator replica and stops it (gracefully, then by force) when the test ends.
func startReplica(t *testing.T, kubeconfig, identity string) {
	t.Helper()
	p, err := process.Start(process.Options{Name: identity, Path: operatorBin, LogPath: filepath.Join(t.TempDir(), identity+".log"),
		Args: []string{"--kubeconfig", kubeconfig, "--ring", ring, "--cache-mode", "labels",
			"--lease-namespace", namespace, "--watch-namespace", namespace, "--identity", identity,
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := p.Stop(40 * time.Second); err != nil {
			t.Log(err)
		}
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", identity, p.Tail(10))
		}
	})
}

func installCRD(t *testing.T, ctx context.Context, dyn dynamic.Interface) {
	t.Helper()
	crd := &unstructured.Unstructured{}
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(v1alpha1.CRD), 4096).Decode(&crd.Object); err != nil {
		t.Fatal(err)
	}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// Served, not just Established: listing must work.
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(widgetGVR).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("Widget CRD not served: %v", err)
	}
}
