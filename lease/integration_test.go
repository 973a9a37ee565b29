package lease

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
	"github.com/kshard/kshard/shard"
)

// Integration timings: short enough for fast tests, same proportions as
// the defaults (RenewDeadline 1.33s, RenewTimeout 667ms).
const (
	itLeaseDuration = 2 * time.Second
	itRenewPeriod   = 250 * time.Millisecond
)

type realEnv struct {
	t     *testing.T
	cp    *controlplane.ControlPlane
	admin kubernetes.Interface
	ns    string
}

func newRealEnv(t *testing.T) *realEnv {
	if testing.Short() {
		t.Skip("integration test (starts an API server); -short runs unit tests only")
	}
	cp := sharedControlPlane(t)
	admin := kubernetes.NewForConfigOrDie(cp.Config())
	return &realEnv{t: t, cp: cp, admin: admin, ns: testNamespace(t, admin)}
}

func (e *realEnv) member(cfg *rest.Config, identity string, mutate ...func(*Options)) (*Member, *logSink) {
	e.t.Helper()
	logger, sink := newTestLogger(e.t)
	o := Options{
		Client: kubernetes.NewForConfigOrDie(cfg), Namespace: e.ns, Ring: "demo", Identity: identity,
		Partitions: 7, Params: "p7", LeaseDuration: itLeaseDuration, RenewPeriod: itRenewPeriod,
		Logger: logger,
	}
	for _, f := range mutate {
		f(&o)
	}
	m, err := New(o)
	if err != nil {
		e.t.Fatal(err)
	}
	return m, sink
}

// kubectl runs kubectl against the test's API server; ok is false when
// kubectl is not on PATH (the caller reports that visibly at its end).
func (e *realEnv) kubectl(args ...string) (out string, ok bool) {
	e.t.Helper()
	path, err := exec.LookPath("kubectl")
	if err != nil {
		return "", false
	}
	b, err := exec.Command(path, append([]string{"--kubeconfig", e.cp.KubeconfigPath(), "-n", e.ns}, args...)...).CombinedOutput()
	if err != nil {
		e.t.Fatalf("kubectl %v: %v\n%s", args, err, b)
	}
	return string(b), true
}

func TestIntegrationLeaseFormatHeartbeatAndKubectl(t *testing.T) {
	e := newRealEnv(t)
	reg := prometheus.NewRegistry()
	m, _ := e.member(e.cp.Config(), "r-0", func(o *Options) { o.Registerer = reg })
	run(t, m)
	eventually(t, "Synced", m.Synced)

	ctx := context.Background()
	l, err := e.admin.CoordinationV1().Leases(e.ns).Get(ctx, "demo-r-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o := Parse(l, "demo", 7)
	if o.Problem != "" || o.Identity != "r-0" || o.State != handoff.StateJoining || o.Incarnation != m.Incarnation() ||
		o.Fingerprint != "p7" || !o.Claim.IsEmpty() || l.Labels[LabelPartitions] != "0" || *l.Spec.LeaseDurationSeconds != 2 {
		t.Fatalf("Lease as written: %+v", l)
	}
	eventually(t, "renewTime to advance", func() bool {
		next, err := e.admin.CoordinationV1().Leases(e.ns).Get(ctx, "demo-r-0", metav1.GetOptions{})
		return err == nil && next.Spec.RenewTime.After(l.Spec.RenewTime.Time) && next.ResourceVersion != l.ResourceVersion
	})

	// The kubectl columns are checked when kubectl is installed; every
	// other check runs regardless, and a missing kubectl is reported as a
	// skip at the end.
	out, haveKubectl := e.kubectl("get", "leases", "-l", "kshard.io/ring=demo", "-L", "kshard.io/state,kshard.io/partitions")
	if haveKubectl && (!strings.Contains(out, "STATE") || !strings.Contains(out, "PARTITIONS") || !rowHas(out, "demo-r-0", "r-0", "joining", "0")) {
		t.Fatalf("kubectl output:\n%s", out)
	}

	// SetDesired is published at once, not at the next period.
	start := time.Now()
	m.SetDesired(handoff.Record{State: handoff.StateActive, Claim: shard.NewPartitionSet(7, 1, 2, 3), Generation: 1})
	eventually(t, "the informer to observe the new record", func() bool {
		o, ok := observedByName(m.Snapshot(), "demo-r-0")
		return ok && o.State == handoff.StateActive && o.Claim.Len() == 3
	})
	t.Logf("SetDesired → own write observed through the watch: %s", time.Since(start).Round(time.Millisecond))
	if out, ok := e.kubectl("get", "leases", "-l", "kshard.io/ring=demo", "-L", "kshard.io/state,kshard.io/partitions"); ok {
		if !rowHas(out, "demo-r-0", "active", "3") {
			t.Fatalf("kubectl output after SetDesired:\n%s", out)
		}
		t.Logf("kubectl:\n%s", out)
	}

	// Steady state: one write per RenewPeriod.
	renews := func() float64 { return counterValue(t, reg, "kshard_lease_renews_total", nil) }
	window := 4 * time.Second
	before, from := renews(), time.Now()
	deadline := time.NewTimer(window)
	<-deadline.C // a measurement window, not synchronisation
	n, took := renews()-before, time.Since(from)
	perPeriod := n / (float64(took) / float64(itRenewPeriod))
	t.Logf("%v writes in %s at RenewPeriod %s: %.2f writes per period (= %.0f writes/min at the default 2s)", n, took.Round(time.Millisecond), itRenewPeriod, perPeriod, perPeriod*30)
	// More than one write per period costs the API server; fewer is a
	// renewer that falls behind, which only matters once a renew deadline
	// (1.33s here, 5.3 periods) could pass without one. A loaded machine
	// running -race stretches each write, so the floor is half a write per
	// period, still far above that.
	if perPeriod < 0.5 || perPeriod > 1.05 {
		t.Errorf("%.2f writes per RenewPeriod, want about one (0.5 to 1.05)", perPeriod)
	}
	if errs := counterValue(t, reg, "kshard_lease_renew_errors_total", nil); errs != 0 {
		t.Errorf("%v renew errors against a healthy API server", errs)
	}
	if !haveKubectl {
		t.Skip("kubectl is not on PATH: every check ran except the kubectl columns")
	}
}

// rowHas reports whether one line of out has every field.
func rowHas(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		cols := strings.Fields(line)
		all := true
		for _, f := range fields {
			found := false
			for _, c := range cols {
				found = found || c == f
			}
			all = all && found
		}
		if all {
			return true
		}
	}
	return false
}

// partition is a transport switch: while cut, requests fail and open
// responses (watch streams) are broken, as in a network partition.
type partition struct {
	mu     sync.Mutex
	cut    bool
	bodies map[*cutBody]bool
}

func (p *partition) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return partitionRT{p, rt} })
	return cfg
}

func (p *partition) set(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for b := range p.bodies {
			_ = b.ReadCloser.Close()
		}
	}
}

type partitionRT struct {
	p  *partition
	rt http.RoundTripper
}

var errPartitioned = errors.New("test partition: network unreachable")

func (r partitionRT) RoundTrip(req *http.Request) (*http.Response, error) {
	r.p.mu.Lock()
	cut := r.p.cut
	r.p.mu.Unlock()
	if cut {
		return nil, errPartitioned
	}
	resp, err := r.rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b := &cutBody{ReadCloser: resp.Body, p: r.p}
	r.p.mu.Lock()
	if r.p.bodies == nil {
		r.p.bodies = map[*cutBody]bool{}
	}
	r.p.bodies[b] = true
	r.p.mu.Unlock()
	resp.Body = b
	return resp, nil
}

type cutBody struct {
	io.ReadCloser
	p *partition
}

func (b *cutBody) Close() error {
	b.p.mu.Lock()
	delete(b.p.bodies, b)
	b.p.mu.Unlock()
	return b.ReadCloser.Close()
}

// TestIntegrationSameIdentity: a second process with the same identity never
// writes the Lease on its own while the first renews; once the caller (the
// handoff core) allows a takeover of the version it judged, it takes over,
// and the first, back, stops writing instead of fighting.
func TestIntegrationSameIdentity(t *testing.T) {
	e := newRealEnv(t)
	var cutA partition
	ma, _ := e.member(cutA.wrap(e.cp.Config()), "r-0")
	a := run(t, ma)
	eventually(t, "a Synced", a.Synced)

	mb, logB := e.member(e.cp.Config(), "r-0")
	b := run(t, mb)
	eventually(t, "b to report the wait", func() bool { return logB.count("is held by another process") > 0 })
	// For two lease durations of a renewing, b keeps waiting.
	sample := time.NewTicker(50 * time.Millisecond) // sampling an invariant over a window
	for end := time.Now().Add(2 * itLeaseDuration); time.Now().Before(end); <-sample.C {
		if b.Synced() || !a.Synced() || a.returned() {
			t.Fatalf("while a renews: a synced %v returned %v, b synced %v", a.Synced(), a.returned(), b.Synced())
		}
	}
	sample.Stop()

	cutA.set(true)
	eventually(t, "b to see a's last write", func() bool {
		_, v := ma.lastWritten()
		o, ok := observedByName(mb.Snapshot(), "demo-r-0")
		return ok && o.Version == v
	})
	// A renew of a's sent just before the cut may still land after b judged
	// the version: b's takeover of that version then conflicts, and the
	// caller (the core) judges the newer one, as here.
	allowed := ""
	eventually(t, "b to take over", func() bool {
		if seen, ok := observedByName(mb.Snapshot(), "demo-r-0"); ok && seen.Version != allowed {
			allowed = seen.Version
			mb.TakeOver(allowed)
		}
		return b.Synced()
	})
	cutA.set(false)
	eventually(t, "a to stop writing", func() bool { return !a.Synced() })
	time.Sleep(2 * itRenewPeriod) // a window in which a would renew if it still did
	l, err := e.admin.CoordinationV1().Leases(e.ns).Get(context.Background(), "demo-r-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Annotations[AnnotationIncarnation] != mb.Incarnation() || a.returned() || !b.Synced() {
		t.Fatalf("after the takeover: holder incarnation %q (b is %q), a returned %v, b synced %v",
			l.Annotations[AnnotationIncarnation], mb.Incarnation(), a.returned(), b.Synced())
	}
}

// TestIntegrationRestartAfterCrashAndAfterLeave: after a crash the new
// process waits for the takeover its core allows; after a graceful leave
// (Delete) it creates the Lease at once.
func TestIntegrationRestartAfterCrashAndAfterLeave(t *testing.T) {
	e := newRealEnv(t)
	m1, _ := e.member(e.cp.Config(), "r-0")
	first := run(t, m1)
	eventually(t, "first Synced", first.Synced)
	if err := first.stop(); err != nil { // a crash: the Lease stays
		t.Fatal(err)
	}
	_, crashed := m1.lastWritten()

	m2, _ := e.member(e.cp.Config(), "r-0")
	second := run(t, m2)
	eventually(t, "the restart to list", m2.Listed)
	time.Sleep(itLeaseDuration) // a window in which the old Member took over by itself
	if second.Synced() {
		t.Fatal("the restart took the crashed incarnation's Lease over without being allowed to")
	}
	start := time.Now()
	m2.TakeOver(crashed)
	eventually(t, "the takeover", second.Synced)
	t.Logf("takeover after TakeOver: %s", time.Since(start).Round(time.Millisecond))

	if err := second.Delete(context.Background()); err != nil { // a graceful leave
		t.Fatal(err)
	}
	m3, _ := e.member(e.cp.Config(), "r-0")
	start = time.Now()
	third := run(t, m3)
	eventually(t, "the restart after a leave", third.Synced)
	delay := time.Since(start)
	t.Logf("restart after a graceful leave acquired after %s", delay.Round(time.Millisecond))
	if delay > itLeaseDuration/2 {
		t.Errorf("restart after a graceful leave took %s; it should not wait", delay)
	}
	if err := second.stop(); err != nil {
		t.Errorf("Run after Delete returned %v", err)
	}
}

func TestIntegrationConfirmAndDeletePeer(t *testing.T) {
	e := newRealEnv(t)
	ctx := context.Background()
	ma, _ := e.member(e.cp.Config(), "a")
	mb, _ := e.member(e.cp.Config(), "b")
	a, b := run(t, ma), run(t, mb)
	eventually(t, "both Synced", func() bool { return a.Synced() && b.Synced() })
	eventually(t, "a to see b", func() bool { _, ok := observedByName(a.Snapshot(), "demo-b"); return ok })

	seen, _ := observedByName(a.Snapshot(), "demo-b")
	eventually(t, "b to renew past the version a saw", func() bool {
		got, err := a.ReadPeer(ctx, handoff.LeaseRef{Identity: "b"})
		if err != nil {
			t.Fatal(err)
		}
		return got.Found && got.Version != seen.Version
	})
	if err := b.stop(); err != nil { // b crashes; its Lease stays
		t.Fatal(err)
	}
	// b's last version is the server's, not lastWritten: a renew sent just
	// before the stop may land with its answer lost (a CI run saw one).
	// Nobody writes the Lease any more, so Confirm of its version holds.
	var last string
	eventually(t, "a direct read of b's Lease to show its last version", func() bool {
		l, err := e.admin.CoordinationV1().Leases(e.ns).Get(ctx, "demo-b", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.ReadPeer(ctx, handoff.LeaseRef{Identity: "b"})
		if err != nil {
			t.Fatal(err)
		}
		last = l.ResourceVersion
		return got.Found && got.Version == last
	})
	if _, written := mb.lastWritten(); written != last {
		t.Logf("b's last acknowledged write was %s, the Lease is at %s (a renew landed unacknowledged)", written, last)
	}
	if err := a.DeletePeer(ctx, "b", seen.Version); err != nil {
		t.Fatalf("DeletePeer with a stale version: %v, want nil", err)
	}
	if _, err := e.admin.CoordinationV1().Leases(e.ns).Get(ctx, "demo-b", metav1.GetOptions{}); err != nil {
		t.Fatalf("a stale DeletePeer deleted the Lease: %v", err)
	}
	if err := a.DeletePeer(ctx, "b", last); err != nil {
		t.Fatal(err)
	}
	if got, err := a.ReadPeer(ctx, handoff.LeaseRef{Identity: "b"}); got.Found || err != nil {
		t.Errorf("ReadPeer of a deleted Lease = %+v, %v; want not found", got, err)
	}
	eventually(t, "a's view to drop b", func() bool { _, ok := observedByName(a.Snapshot(), "demo-b"); return !ok })
}

func TestIntegrationForbiddenNamesThePermission(t *testing.T) {
	e := newRealEnv(t)
	ctx := context.Background()
	restricted := e.cp.RestrictedConfig()

	m, _ := e.member(restricted, "r-0")
	err := run(t, m).wait(t)
	var fe *ForbiddenError
	if !errors.As(err, &fe) || !apierrors.IsForbidden(err) {
		t.Fatalf("Run returned %v, want a ForbiddenError", err)
	}
	t.Logf("no permissions: %v", err)
	for _, want := range []string{"forbidden to " + fe.Verb + " leases.coordination.k8s.io", `in namespace "` + e.ns + `"`, `as "kshard-restricted"`, "grant verbs get,list,watch,create,update,delete on leases"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q", want)
		}
	}

	// Reading allowed, writing not: the error names create and the Lease.
	grant(t, e, "get", "list", "watch")
	m, _ = e.member(restricted, "r-0")
	err = run(t, m).wait(t)
	if !errors.As(err, &fe) || fe.Verb != "create" || !strings.Contains(err.Error(), `forbidden to create leases.coordination.k8s.io "demo-r-0" in namespace "`+e.ns+`" as "kshard-restricted"`) {
		t.Fatalf("with read-only RBAC Run returned %v, want forbidden to create", err)
	}
	t.Logf("read-only: %v", err)

	grant(t, e, "get", "list", "watch", "create", "update", "delete")
	m, _ = e.member(restricted, "r-0")
	r := run(t, m)
	eventually(t, "Synced with the documented permissions", r.Synced)
	if err := r.Delete(ctx); err != nil {
		t.Fatal(err)
	}
}

// grant gives the restricted user exactly verbs on Leases in the test's
// namespace and waits until the authorizer applies them.
func grant(t *testing.T, e *realEnv, verbs ...string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "kshard-lease", Namespace: e.ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: verbs}},
	}
	// Roles may be created by an update: one call serves both cases.
	if _, err := e.admin.RbacV1().Roles(e.ns).Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kshard-lease", Namespace: e.ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "kshard-lease"},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "kshard-restricted"}},
	}
	if _, err := e.admin.RbacV1().RoleBindings(e.ns).Update(ctx, binding, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(e.cp.RestrictedConfig())
	for _, verb := range verbs {
		eventually(t, "RBAC to allow "+verb, func() bool {
			review, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: verb, Group: "coordination.k8s.io", Resource: "leases", Namespace: e.ns}},
			}, metav1.CreateOptions{})
			return err == nil && review.Status.Allowed
		})
	}
}

// TestIntegrationAPIServerOutage stops the API server under a running member
// and starts another member while it is down. It has a control plane of its
// own, since it disturbs it.
func TestIntegrationAPIServerOutage(t *testing.T) {
	cp := controlplane.ForTest(t, controlplane.Options{})
	e := &realEnv{t: t, cp: cp, admin: kubernetes.NewForConfigOrDie(cp.Config()), ns: "default"}
	ma, logA := e.member(cp.Config(), "a")
	a := run(t, ma)
	eventually(t, "a Synced", a.Synced)

	cp.StopAPIServer()
	stopped := time.Now()
	eventually(t, "a's renews to stall", func() bool {
		sent, _ := a.LastRenew()
		return time.Since(sent) > itLeaseDuration
	})
	if sent, _ := a.LastRenew(); sent.After(stopped) {
		t.Fatalf("a renew sent at %v, after the API server stopped at %v, was counted", sent, stopped)
	}

	mb, logB := e.member(cp.Config(), "b")
	b := run(t, mb)
	eventually(t, "b to report failures", func() bool { return logB.count("reading own Lease failed") >= 2 })
	if b.Synced() {
		t.Fatal("b Synced without an API server")
	}

	if err := cp.StartAPIServer(context.Background()); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	eventually(t, "a to renew again", func() bool { sent, _ := a.LastRenew(); return sent.After(up) })
	t.Logf("outage %s; a renewed %s after the API server was ready",
		up.Sub(stopped).Round(time.Millisecond), time.Since(up).Round(time.Millisecond))
	eventually(t, "b Synced", b.Synced)
	t.Logf("b (started during the outage) Synced %s after the API server was ready", time.Since(up).Round(time.Millisecond))
	eventually(t, "a to see b", func() bool { _, ok := observedByName(a.Snapshot(), "demo-b"); return ok })
	t.Logf("a's view recovered %s after the API server was ready; a logged %d renew failures",
		time.Since(up).Round(time.Millisecond), logA.count("renewing own Lease failed"))
	if a.returned() || b.returned() {
		t.Fatalf("an outage stopped a member: a %v, b %v", a.err, b.err)
	}
}
