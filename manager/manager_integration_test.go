package manager

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/internal/testwait"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
	"github.com/kshard/kshard/shard/ringstatus"
)

// interval is one reconcile as a replica saw it.
type interval struct {
	replica    string
	key        string
	start, end time.Time
}

// journal collects reconcile intervals from every in-process replica.
type journal struct {
	mu      sync.Mutex
	recs    []interval
	running map[string]int // reconciles in flight, per replica
}

func (j *journal) add(iv interval) { j.mu.Lock(); j.recs = append(j.recs, iv); j.mu.Unlock() }

// begin and end count a reconcile of replica in flight.
func (j *journal) begin(replica string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.running == nil {
		j.running = map[string]int{}
	}
	j.running[replica]++
}

func (j *journal) end(replica string) { j.mu.Lock(); j.running[replica]--; j.mu.Unlock() }

// inFlight returns how many reconciles of replica are running.
func (j *journal) inFlight(replica string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.running[replica]
}

func (j *journal) snapshot() []interval {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]interval(nil), j.recs...)
}

// overlaps returns every pair of intervals of one key, on different
// replicas, that overlap in time.
func overlaps(recs []interval) []string {
	byKey := map[string][]interval{}
	for _, r := range recs {
		byKey[r.key] = append(byKey[r.key], r)
	}
	var out []string
	for key, rs := range byKey {
		for i := range rs {
			for k := i + 1; k < len(rs); k++ {
				a, b := rs[i], rs[k]
				if a.replica != b.replica && a.start.Before(b.end) && b.start.Before(a.end) {
					out = append(out, fmt.Sprintf("%s: %s [%s,%s] and %s [%s,%s]", key, a.replica, a.start.Format(time.StampMicro), a.end.Format(time.StampMicro), b.replica, b.start.Format(time.StampMicro), b.end.Format(time.StampMicro)))
				}
			}
		}
	}
	return out
}

func testLogger(t *testing.T, name string) logr.Logger {
	return funcr.New(func(prefix, args string) { t.Logf("%s %s %s", name, prefix, args) }, funcr.Options{Verbosity: 1})
}

// logLines keeps a replica's log lines, beside the test log, so a test
// can check what the replica did rather than how long it took.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

// into is a startReplica tweak logging identity's lines into l.
func (l *logLines) into(t *testing.T, identity string) func(*Options) {
	return func(o *Options) {
		o.Logger = funcr.New(func(prefix, args string) {
			t.Logf("%s %s %s", identity, prefix, args)
			l.mu.Lock()
			l.lines = append(l.lines, args)
			l.mu.Unlock()
		}, funcr.Options{Verbosity: 1})
	}
}

// count counts the lines holding substr.
func (l *logLines) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}

type replica struct {
	mgr      *Manager
	cancel   context.CancelFunc
	done     chan error
	stopOnce sync.Once
}

func startReplica(t *testing.T, cfg *rest.Config, ns, identity string, j *journal, work time.Duration, tweaks ...func(*Options)) *replica {
	t.Helper()
	opts := Options{
		Ring: "it", LeaseNamespace: ns, Identity: identity, WatchNamespace: ns,
		LeaseDuration: 3 * time.Second, RenewPeriod: 300 * time.Millisecond, RenewDeadline: 2 * time.Second,
		DrainGracePeriod: time.Second, GracefulShutdownTimeout: 20 * time.Second,
		MetricsBindAddress: "127.0.0.1:0", HealthProbeBindAddress: "127.0.0.1:0",
		Logger: testLogger(t, identity),
	}
	for _, tweak := range tweaks {
		tweak(&opts)
	}
	mgr, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	err = controller.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2, SkipNameValidation: true}).
		Complete(controller.ReconcilerFunc(func(ctx context.Context, req controller.Request) (controller.Result, error) {
			j.begin(identity)
			defer j.end(identity)
			start := time.Now()
			select {
			case <-time.After(work):
			case <-ctx.Done():
			}
			j.add(interval{replica: identity, key: req.Key(), start: start, end: time.Now()})
			return controller.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	return runReplica(t, mgr)
}

// runReplica starts mgr until the test ends.
func runReplica(t *testing.T, mgr *Manager) *replica {
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{mgr: mgr, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- mgr.Start(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *replica) stop(t *testing.T) {
	r.stopOnce.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("manager %s stopped with %v", r.mgr.Identity(), err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("manager %s did not stop", r.mgr.Identity())
		}
	})
}

// ringSettled reports whether the ring has converged on exactly the
// replicas ids (see ringstatus.Ring.Converged), and why not.
func ringSettled(ctx context.Context, cs kubernetes.Interface, ns string, ids ...string) (bool, string) {
	r, err := ringstatus.Read(ctx, cs, ns, "it")
	if err == nil {
		err = r.Converged(ids...)
	}
	if err != nil {
		return false, err.Error()
	}
	return true, ""
}

func leasesOf(ctx context.Context, cs kubernetes.Interface, ns string) []coordinationv1.Lease {
	l, _ := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
	return l.Items
}

// newTestRing starts a control plane for the test and creates namespace ns
// in it; it returns the admin config and a client.
func newTestRing(t *testing.T, ns string) (*rest.Config, kubernetes.Interface) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test (starts an API server); -short runs unit tests only")
	}
	cfg := controlplane.ForTest(t, controlplane.Options{}).Config()
	cs := kubernetes.NewForConfigOrDie(cfg)
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return cfg, cs
}

// createConfigMaps creates cm-0 … cm-<n-1> in ns.
func createConfigMaps(t *testing.T, cs kubernetes.Interface, ns string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Namespace: ns}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// updateConfigMaps changes the data of cm-0 … cm-<n-1>, so each is
// reconciled again.
func updateConfigMaps(t *testing.T, cs kubernetes.Interface, ns string, n int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, fmt.Sprintf("cm-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data = map[string]string{"gen": "2"}
		if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTwoReplicasShareKeysAndHandOffOnLeave(t *testing.T) {
	ctx := context.Background()
	ns := "it"
	cfg, cs := newTestRing(t, ns)
	const objects = 60
	createConfigMaps(t, cs, ns, objects)
	j := &journal{}
	r0 := startReplica(t, cfg, ns, "r-0", j, 20*time.Millisecond)
	r1 := startReplica(t, cfg, ns, "r-1", j, 20*time.Millisecond)
	testwait.For(t, 30*time.Second, "two replicas to split the ring", func() (bool, string) { return ringSettled(ctx, cs, ns, "r-0", "r-1") })
	reconciledBy := func(from int) map[string]string {
		out := map[string]string{}
		for _, iv := range j.snapshot()[from:] {
			out[iv.key] = iv.replica
		}
		return out
	}
	testwait.For(t, 20*time.Second, "every key reconciled", func() (bool, string) {
		n := len(reconciledBy(0))
		return n >= objects, fmt.Sprintf("%d keys", n)
	})
	byReplica := map[string]int{}
	for _, r := range reconciledBy(0) {
		byReplica[r]++
	}
	if byReplica["r-0"] == 0 || byReplica["r-1"] == 0 {
		t.Fatalf("keys not spread over both replicas: %v", byReplica)
	}

	// r-0 leaves; r-1 must take over everything and reconcile every key.
	mark := len(j.snapshot())
	leaveStart := time.Now()
	r0.stop(t)
	t.Logf("graceful leave of r-0 took %s", time.Since(leaveStart))
	testwait.For(t, 10*time.Second, "r-1 alone to own the ring", func() (bool, string) { return ringSettled(ctx, cs, ns, "r-1") })
	updateConfigMaps(t, cs, ns, objects)
	testwait.For(t, 20*time.Second, "r-1 to reconcile every updated key", func() (bool, string) {
		got := reconciledBy(mark)
		for i := 0; i < objects; i++ {
			if got[fmt.Sprintf("%s/cm-%d", ns, i)] != "r-1" {
				return false, fmt.Sprintf("cm-%d not reconciled by r-1 (%d keys)", i, len(got))
			}
		}
		return true, ""
	})
	_ = r1
	if o := overlaps(j.snapshot()); len(o) > 0 {
		t.Fatalf("%d overlapping reconciles, first: %s", len(o), o[0])
	}
}

// readyz fetches the replica's /readyz and returns its status and body.
func readyz(t *testing.T, m *Manager) (int, string) {
	return get("http://" + m.ProbeAddr() + "/readyz")
}

// get returns url's status and body; status 0 and the error when it fails.
func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// A replica configured with another partition count must not join a ring
// whose active members run the old one: their claims cannot be compared, so
// joining could run a key on two replicas. It stays unready and says why,
// and the existing member keeps every partition.
func TestOtherRingConfigurationRefusesToJoin(t *testing.T) {
	ctx := context.Background()
	ns := "it-config"
	cfg, cs := newTestRing(t, ns)
	j := &journal{}
	startReplica(t, cfg, ns, "r-0", j, time.Millisecond)
	testwait.For(t, 30*time.Second, "r-0 to own the ring", func() (bool, string) { return ringSettled(ctx, cs, ns, "r-0") })

	r1 := startReplica(t, cfg, ns, "r-1", j, time.Millisecond, func(o *Options) { o.Partitions = 1021 })
	testwait.For(t, 30*time.Second, "r-1 to refuse to join", func() (bool, string) {
		reason := r1.mgr.notReadyReason()
		return strings.Contains(reason, "r-0") && strings.Contains(reason, "same ring configuration"), reason
	})
	code, body := readyz(t, r1.mgr)
	if code != http.StatusInternalServerError || !strings.Contains(body, "same ring configuration") {
		t.Fatalf("r-1 /readyz = %d %q; want 500 naming the configuration mismatch", code, body)
	}
	if ok, msg := ringSettled(ctx, cs, ns, "r-0"); !ok {
		t.Fatalf("r-0 lost partitions to a replica of another configuration: %s", msg)
	}
	l, err := cs.CoordinationV1().Leases(ns).Get(ctx, "it-r-1", metav1.GetOptions{})
	if err == nil {
		if st := l.Labels[membership.LabelState]; st == "active" {
			t.Fatalf("r-1's Lease says %s", st)
		}
	}
}

// With the API server unreachable at start, Start keeps retrying instead of
// failing, /readyz says what it waits for, and a stop still returns promptly.
func TestUnreachableAPIServerAtStartIsNotReadyAndRetries(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1", TLSClientConfig: rest.TLSClientConfig{Insecure: true}, BearerToken: "unused"}
	j := &journal{}
	r := startReplica(t, cfg, "default", "r-0", j, time.Millisecond)
	testwait.For(t, 20*time.Second, "readyz to name the unreachable API server", func() (bool, string) {
		code, body := readyz(t, r.mgr)
		return code == http.StatusInternalServerError && strings.Contains(body, "API server at https://127.0.0.1:1 to be reachable"), fmt.Sprintf("%d %q", code, body)
	})
	select {
	case err := <-r.done:
		t.Fatalf("Start gave up while the API server was unreachable: %v", err)
	default:
	}
	stopped := time.Now()
	r.stop(t)
	// Promptly: well under GracefulShutdownTimeout (startReplica's 20s),
	// which a stop waiting for a leave it cannot make would take. Half of
	// it leaves ~10s for scheduling; a prompt stop takes milliseconds.
	if d, limit := time.Since(stopped), 20*time.Second/2; d > limit {
		t.Fatalf("stopping a replica that never reached the API server took %s, over %s: did it wait for GracefulShutdownTimeout?", d, limit)
	}
}

// A Lease with the ring's label but a claim nobody can read is never trusted
// as a member: while it is live its claim counts as every partition (it may
// hide a reconcile), so nothing is activated; once it stops changing for a
// LeaseDuration the replica takes the ring. The fault is counted in metrics.
func TestGarbageLeaseBlocksUntilItExpires(t *testing.T) {
	ctx := context.Background()
	ns := "it-garbage"
	cfg, cs := newTestRing(t, ns)
	holder := "ghost"
	ghost := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "it-ghost", Namespace: ns,
			Labels:      map[string]string{lease.LabelRing: "it", membership.LabelState: "active"},
			Annotations: map[string]string{membership.AnnotationClaim: "v1:271:not-base64!", membership.AnnotationIncarnation: "x", membership.AnnotationGeneration: "1"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}
	if _, err := cs.CoordinationV1().Leases(ns).Create(ctx, ghost, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "work", Namespace: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	j := &journal{}
	started := time.Now()
	r := startReplica(t, cfg, ns, "r-0", j, time.Millisecond)
	const leaseDuration = 3 * time.Second // startReplica's
	testwait.For(t, 30*time.Second, "r-0 to reconcile once the garbage Lease expired", func() (bool, string) {
		return len(j.snapshot()) > 0, "no reconcile yet"
	})
	if d := j.snapshot()[0].start.Sub(started); d < leaseDuration {
		t.Fatalf("r-0 reconciled %s after start, while the garbage Lease was live (it expires after %s)", d, leaseDuration)
	}
	code, body := get("http://" + r.mgr.MetricsAddr() + "/metrics")
	if code != http.StatusOK || !strings.Contains(body, `kshard_lease_invalid_total{reason="bad_claim"`) {
		t.Fatalf("metrics do not count the malformed Lease:\n%s", body)
	}
}

// A replica of another configuration that refuses to join claims nothing,
// so it must not stall the ring it refused: when a member leaves, the others
// still take over its partitions.
func TestRefusingReplicaDoesNotStallTheRing(t *testing.T) {
	ctx := context.Background()
	ns := "it-stall"
	cfg, cs := newTestRing(t, ns)
	const objects = 30
	createConfigMaps(t, cs, ns, objects)
	j := &journal{}
	startReplica(t, cfg, ns, "r-0", j, time.Millisecond)
	r1 := startReplica(t, cfg, ns, "r-1", j, time.Millisecond)
	testwait.For(t, 30*time.Second, "two replicas to split the ring", func() (bool, string) { return ringSettled(ctx, cs, ns, "r-0", "r-1") })
	r2 := startReplica(t, cfg, ns, "r-2", j, time.Millisecond, func(o *Options) { o.Partitions = 1021 })
	testwait.For(t, 30*time.Second, "r-2 to refuse to join", func() (bool, string) {
		reason := r2.mgr.notReadyReason()
		return strings.Contains(reason, "same ring configuration"), reason
	})

	r1.stop(t)
	testwait.For(t, 20*time.Second, "r-0 to own the ring alone", func() (bool, string) { return ringSettled(ctx, cs, ns, "r-0") })
	mark := len(j.snapshot())
	updateConfigMaps(t, cs, ns, objects)
	testwait.For(t, 20*time.Second, "r-0 to reconcile every key, r-1's former ones too", func() (bool, string) {
		seen := map[string]bool{}
		for _, iv := range j.snapshot()[mark:] {
			if iv.replica == "r-0" {
				seen[iv.key] = true
			}
		}
		return len(seen) == objects, fmt.Sprintf("%d of %d keys", len(seen), objects)
	})
	for _, iv := range j.snapshot() {
		if iv.replica == "r-2" {
			t.Fatalf("the refusing replica reconciled %s", iv.key)
		}
	}
}

// TestOwnLeaseDeletedOrRelabelledRecovers plays an operator who deletes a
// live member's Lease, then relabels it out of the ring, while keys are being
// reconciled (issue 11): no key is reconciled by both replicas at once, the
// member does not exit, and it is a working member again within
// 2×LeaseDuration, by itself.
func TestOwnLeaseDeletedOrRelabelledRecovers(t *testing.T) {
	ctx := context.Background()
	ns := "it-tamper"
	cfg, cs := newTestRing(t, ns)
	const objects = 40
	createConfigMaps(t, cs, ns, objects)
	j := &journal{}
	log0 := &logLines{}
	r0 := startReplica(t, cfg, ns, "r-0", j, 300*time.Millisecond, log0.into(t, "r-0"))
	startReplica(t, cfg, ns, "r-1", j, 300*time.Millisecond)
	testwait.For(t, 30*time.Second, "two replicas to split the ring", func() (bool, string) { return ringSettled(ctx, cs, ns, "r-0", "r-1") })
	leases := cs.CoordinationV1().Leases(ns)
	const leaseDuration = 3 * time.Second // startReplica's
	// What a recovery may exceed 2×LeaseDuration by: its steps (the fence,
	// the Lease re-created or relabelled, the peers' watch events, the
	// activation) each wake on a timer or a watch event, and on a loaded
	// 2-core machine under -race each may wake late. It takes 0.1-0.4s on
	// a quiet machine; a recovery that waited a Lease out is caught by the
	// log check below, not by this bound.
	const schedulingAllowance = 2 * time.Second

	for _, tamper := range []struct {
		name string
		do   func() error
	}{
		{"delete", func() error { return leases.Delete(ctx, "it-r-0", metav1.DeleteOptions{}) }},
		{"relabel", func() error {
			// The member renews the Lease every RenewPeriod: a renewal
			// between the read and the write is a conflict to retry,
			// as any writer of a live object does (it failed a 1.35
			// compat run on a loaded machine).
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				l, err := leases.Get(ctx, "it-r-0", metav1.GetOptions{})
				if err != nil {
					return err
				}
				l.Labels["kshard.io/ring"] = "other"
				_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
				return err
			})
		}},
	} {
		updateConfigMaps(t, cs, ns, objects) // reconciles in flight on both replicas
		// The tamper must hit running reconciles.
		testwait.For(t, 10*time.Second, "reconciles in flight on r-0", func() (bool, string) {
			n := j.inFlight("r-0")
			return n > 0, fmt.Sprintf("%d in flight", n)
		})
		fencesBefore := fences(t, r0.mgr)
		waitsBefore := log0.count("waiting until it has expired")
		if err := tamper.do(); err != nil {
			t.Fatalf("%s: %v", tamper.name, err)
		}
		start := time.Now() // the tamper's own request is not the recovery's
		testwait.For(t, leaseDuration, "r-0 to fence after the "+tamper.name, func() (bool, string) {
			n := fences(t, r0.mgr)
			return n > fencesBefore, fmt.Sprintf("%v fences", n)
		})
		t.Logf("%s: r-0 fenced %s after it", tamper.name, time.Since(start).Round(time.Millisecond))
		testwait.For(t, 4*leaseDuration, "r-0 to be a working member again after the "+tamper.name, func() (bool, string) {
			if ok, msg := ringSettled(ctx, cs, ns, "r-0", "r-1"); !ok {
				return false, msg
			}
			code, body := readyz(t, r0.mgr)
			return code == http.StatusOK, body
		})
		took := time.Since(start)
		t.Logf("%s of a live member's Lease: member working again after %s (LeaseDuration %s)", tamper.name, took.Round(time.Millisecond), leaseDuration)
		if n := log0.count("waiting until it has expired") - waitsBefore; n != 0 {
			t.Errorf("after the %s r-0 waited %d times for its Lease to expire; it must re-create or relabel it at once", tamper.name, n)
		}
		if limit := 2*leaseDuration + schedulingAllowance; took > limit {
			t.Errorf("recovery after the %s took %s, more than 2×LeaseDuration (+%s scheduling allowance)", tamper.name, took, schedulingAllowance)
		}
		select {
		case err := <-r0.done:
			t.Fatalf("r-0 stopped after the %s: %v", tamper.name, err)
		default:
		}
	}
	if o := overlaps(j.snapshot()); len(o) > 0 {
		t.Fatalf("%d overlapping reconciles, first: %s", len(o), o[0])
	}
}

// fences reads kshard_fences_total from the replica's metrics endpoint.
func fences(t *testing.T, m *Manager) float64 {
	t.Helper()
	code, body := get("http://" + m.MetricsAddr() + "/metrics")
	if code != http.StatusOK {
		t.Fatalf("metrics: %d %s", code, body)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "kshard_fences_total "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("kshard_fences_total %q: %v", v, err)
			}
			return n
		}
	}
	return 0
}

// A LeaseNamespace that does not exist keeps the replica unready, and
// /readyz names the namespace and what to do instead of a generic wait; once
// someone creates the namespace the replica joins without a restart.
func TestMissingLeaseNamespaceIsNamedInReadyz(t *testing.T) {
	ctx := context.Background()
	ns, leaseNS := "it-watched", "it-leases"
	cfg, cs := newTestRing(t, ns)
	r := startReplica(t, cfg, ns, "r-0", &journal{}, time.Millisecond, func(o *Options) { o.LeaseNamespace = leaseNS })
	want := `namespace "it-leases" not found: create it or set LeaseNamespace`
	testwait.For(t, 30*time.Second, "/readyz to name the missing namespace", func() (bool, string) {
		code, body := readyz(t, r.mgr)
		return code == http.StatusInternalServerError && strings.Contains(body, want), fmt.Sprintf("%d %q", code, body)
	})
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: leaseNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "r-0 to own the ring in the new namespace", func() (bool, string) { return ringSettled(ctx, cs, leaseNS, "r-0") })
	testwait.For(t, 10*time.Second, "/readyz to pass", func() (bool, string) {
		code, body := readyz(t, r.mgr)
		return code == http.StatusOK, fmt.Sprintf("%d %q", code, body)
	})
}
