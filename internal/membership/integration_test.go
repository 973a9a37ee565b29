package membership

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/kshard/kshard/internal/testkubectl"
	"github.com/kshard/kshard/internal/testwait"
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
// there is no kubectl (testkubectl.Path): the caller reports that at its
// end with testkubectl.Missing, which fails under CI=true.
func (e *realEnv) kubectl(args ...string) (out string, ok bool) {
	e.t.Helper()
	path, err := testkubectl.Path()
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
	renewed := &leaseRequests{name: "demo-r-0", method: http.MethodPut, ok: true}
	cfg := rest.CopyConfig(e.cp.Config())
	cfg.Wrap(renewed.wrap)
	m, logM := e.member(cfg, "r-0", func(o *Options) { o.Registerer = reg })
	run(t, m)
	testwait.True(t, waitTimeout, "Synced", m.Synced)

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
	testwait.True(t, waitTimeout, "renewTime to advance", func() bool {
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
	testwait.True(t, waitTimeout, "the informer to observe the new record", func() bool {
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
	// More than one write per period costs the API server: a bound a
	// loaded machine can only keep better. Fewer is a renewer that falls
	// behind, which matters once a renew deadline could pass without one:
	// checked as that, the longest gap between renewals the API server
	// accepted, not as a rate a loaded machine lowers. RenewDeadline's
	// margin over RenewPeriod (5.3 periods here) is the allowance.
	if perPeriod > 1.05 {
		t.Errorf("%.2f writes per RenewPeriod, want at most one (1.05)", perPeriod)
	}
	renewDeadline := 2 * itLeaseDuration / 3 // the member's default
	if gap := renewed.longestGap(from, from.Add(took)); gap >= renewDeadline {
		t.Errorf("%s between accepted renewals, not under RenewDeadline %s: the renewer fell behind", gap.Round(time.Millisecond), renewDeadline)
	}
	// A healthy API server refuses no renewal: every failure must be the
	// client's own timeout (a loaded machine can make a write outlast
	// RenewTimeout), retried, never a refusal such as a conflict.
	failed, timedOut := logM.count("renewing own Lease failed"), logM.countAll("renewing own Lease failed", "context deadline exceeded")
	if failed != timedOut {
		t.Errorf("%d renewals refused by the API server (%d failures, %d of them timeouts): see the log", failed-timedOut, failed, timedOut)
	}
	if !haveKubectl {
		_, err := testkubectl.Path()
		testkubectl.Missing(t, fmt.Errorf("every check ran except the kubectl columns: %w", err))
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
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	ma, _ := e.member(cutA.wrap(e.cp.Config()), "r-0", func(o *Options) { o.Registerer = regA })
	a := run(t, ma)
	testwait.True(t, waitTimeout, "a Synced", a.Synced)

	mb, logB := e.member(e.cp.Config(), "r-0", func(o *Options) { o.Registerer = regB })
	b := run(t, mb)
	testwait.True(t, waitTimeout, "b to report the wait", func() bool { return logB.count("is held by another process") > 0 })
	// While a renews through two Lease durations, b keeps waiting and
	// writes nothing. The span is counted in a's renews, not in wall-clock
	// time, so a machine that starves a cannot make the check pass
	// without it.
	from := writes(t, regA)
	testwait.For(t, time.Minute, "a to renew through two Lease durations", func() (bool, string) {
		if b.Synced() || !a.Synced() || a.returned() || writes(t, regB) != 0 {
			t.Fatalf("while a renews: a synced %v returned %v, b synced %v, b's writes %v", a.Synced(), a.returned(), b.Synced(), writes(t, regB))
		}
		n := writes(t, regA) - from
		return n >= float64(2*itLeaseDuration/itRenewPeriod), fmt.Sprintf("%v writes of a", n)
	})

	cutA.set(true)
	testwait.True(t, waitTimeout, "b to see a's last write", func() bool {
		_, v := ma.lastWritten()
		o, ok := observedByName(mb.Snapshot(), "demo-r-0")
		return ok && o.Version == v
	})
	// A renew of a's sent just before the cut may still land after b judged
	// the version: b's takeover of that version then conflicts, and the
	// caller (the core) judges the newer one, as here.
	allowed := ""
	testwait.True(t, waitTimeout, "b to take over", func() bool {
		if seen, ok := observedByName(mb.Snapshot(), "demo-r-0"); ok && seen.Version != allowed {
			allowed = seen.Version
			mb.TakeOver(allowed)
		}
		return b.Synced()
	})
	cutA.set(false)
	testwait.True(t, waitTimeout, "a to stop writing", func() bool { return !a.Synced() })
	// a writes nothing more while b renews twice: each renew of b's is a
	// RenewPeriod in which a, renewing on the same period, would have
	// written too. Counted in b's writes, not in a slept window.
	stoppedAt, fromB := writes(t, regA), writes(t, regB)
	testwait.For(t, time.Minute, "b to renew twice more", func() (bool, string) {
		n := writes(t, regB) - fromB
		return n >= 2, fmt.Sprintf("%v writes of b", n)
	})
	l, err := e.admin.CoordinationV1().Leases(e.ns).Get(context.Background(), "demo-r-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := writes(t, regA) - stoppedAt; n != 0 || l.Annotations[AnnotationIncarnation] != mb.Incarnation() || a.returned() || !b.Synced() {
		t.Fatalf("after the takeover: a wrote %v times more, holder incarnation %q (b is %q), a returned %v, b synced %v",
			n, l.Annotations[AnnotationIncarnation], mb.Incarnation(), a.returned(), b.Synced())
	}
}

// leaseRequests records when a client's requests of one method to one
// Lease returned, with ok only those the API server answered 2xx.
type leaseRequests struct {
	name   string
	method string
	ok     bool
	mu     sync.Mutex
	at     []time.Time
}

func (r *leaseRequests) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if req.Method == r.method && strings.HasSuffix(req.URL.Path, "/leases/"+r.name) &&
			(!r.ok || err == nil && resp.StatusCode/100 == 2) {
			r.mu.Lock()
			r.at = append(r.at, time.Now())
			r.mu.Unlock()
		}
		return resp, err
	})
}

// longestGap is the longest time within [from, to] without a recorded
// request, counting from from and to to.
func (r *leaseRequests) longestGap(from, to time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	longest, last := time.Duration(0), from
	for _, at := range r.at {
		if at.Before(from) || at.After(to) {
			continue
		}
		longest, last = max(longest, at.Sub(last)), at
	}
	return max(longest, to.Sub(last))
}

// leaseReads records when a client sent each GET of one Lease.
type leaseReads struct {
	name string
	mu   sync.Mutex
	at   []time.Time
}

func (r *leaseReads) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/leases/"+r.name) {
			r.mu.Lock()
			r.at = append(r.at, time.Now())
			r.mu.Unlock()
		}
		return next.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// since counts the reads sent after t.
func (r *leaseReads) since(t time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, at := range r.at {
		if at.After(t) {
			n++
		}
	}
	return n
}

// writes counts the writes of its own Lease a Member sent, renews and
// failures alike (each write counts in one of them), from its registry.
func writes(t testing.TB, reg *prometheus.Registry) float64 {
	t.Helper()
	return counterValue(t, reg, "kshard_lease_renews_total", nil) + counterValue(t, reg, "kshard_lease_renew_errors_total", nil)
}

// TestIntegrationRestartAfterCrashAndAfterLeave: after a crash the new
// process waits for the takeover its core allows; after a graceful leave
// (Delete) it creates the Lease at once.
func TestIntegrationRestartAfterCrashAndAfterLeave(t *testing.T) {
	e := newRealEnv(t)
	m1, _ := e.member(e.cp.Config(), "r-0")
	first := run(t, m1)
	testwait.True(t, waitTimeout, "first Synced", first.Synced)
	if err := first.stop(); err != nil { // a crash: the Lease stays
		t.Fatal(err)
	}
	_, crashed := m1.lastWritten()

	left, err := e.admin.CoordinationV1().Leases(e.ns).Get(context.Background(), "demo-r-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	expired := left.Spec.RenewTime.Add(itLeaseDuration)

	// The restart reads its Lease every RenewPeriod while it waits. Twice
	// after the crashed incarnation's Lease expired (one read judged and a
	// wait after it) is where a Member that took an expired Lease over by
	// itself would have written: shown by its reads, not by a slept
	// window, and checked by its writes.
	reg2 := prometheus.NewRegistry()
	reads := &leaseReads{name: "demo-r-0"}
	cfg2 := rest.CopyConfig(e.cp.Config())
	cfg2.Wrap(reads.wrap)
	m2, _ := e.member(cfg2, "r-0", func(o *Options) { o.Registerer = reg2 })
	second := run(t, m2)
	tookOver := func() {
		if n := writes(t, reg2); second.Synced() || n != 0 {
			t.Fatalf("the restart took the crashed incarnation's Lease over without being allowed to: synced %v, %v writes", second.Synced(), n)
		}
	}
	testwait.For(t, time.Minute, "the restart to read the crashed incarnation's Lease twice after it expired", func() (bool, string) {
		tookOver()
		n := reads.since(expired)
		return n >= 2, fmt.Sprintf("%d reads since it expired", n)
	})
	tookOver()
	start := time.Now()
	m2.TakeOver(crashed)
	testwait.True(t, waitTimeout, "the takeover", second.Synced)
	t.Logf("takeover after TakeOver: %s", time.Since(start).Round(time.Millisecond))

	if err := second.Delete(context.Background()); err != nil { // a graceful leave
		t.Fatal(err)
	}
	m3, log3 := e.member(e.cp.Config(), "r-0")
	start = time.Now()
	third := run(t, m3)
	testwait.True(t, waitTimeout, "the restart after a leave", third.Synced)
	t.Logf("restart after a graceful leave acquired after %s", time.Since(start).Round(time.Millisecond))
	// Not waiting is what it did, not how long it took (a loaded machine
	// stretches that): it found no Lease and created its own, never
	// waiting for one held by another process.
	if log3.count("is held by another process") != 0 || log3.count("created own Lease") != 1 {
		t.Errorf("restart after a graceful leave: %d waits for a held Lease, %d creates of its own; want 0 and 1",
			log3.count("is held by another process"), log3.count("created own Lease"))
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
	testwait.True(t, waitTimeout, "both Synced", func() bool { return a.Synced() && b.Synced() })
	testwait.True(t, waitTimeout, "a to see b", func() bool { _, ok := observedByName(a.Snapshot(), "demo-b"); return ok })

	seen, _ := observedByName(a.Snapshot(), "demo-b")
	testwait.True(t, waitTimeout, "b to renew past the version a saw", func() bool {
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
	testwait.True(t, waitTimeout, "a direct read of b's Lease to show its last version", func() bool {
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
	testwait.True(t, waitTimeout, "a's view to drop b", func() bool { _, ok := observedByName(a.Snapshot(), "demo-b"); return !ok })
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
	testwait.True(t, waitTimeout, "Synced with the documented permissions", r.Synced)
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
		testwait.True(t, waitTimeout, "RBAC to allow "+verb, func() bool {
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
	testwait.True(t, waitTimeout, "a Synced", a.Synced)

	cp.StopAPIServer()
	stopped := time.Now()
	testwait.True(t, waitTimeout, "a's renews to stall", func() bool {
		sent, _ := a.LastRenew()
		return time.Since(sent) > itLeaseDuration
	})
	if sent, _ := a.LastRenew(); sent.After(stopped) {
		t.Fatalf("a renew sent at %v, after the API server stopped at %v, was counted", sent, stopped)
	}

	mb, logB := e.member(cp.Config(), "b")
	b := run(t, mb)
	testwait.True(t, waitTimeout, "b to report failures", func() bool { return logB.count("reading own Lease failed") >= 2 })
	if b.Synced() {
		t.Fatal("b Synced without an API server")
	}

	if err := cp.StartAPIServer(context.Background()); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	testwait.True(t, waitTimeout, "a to renew again", func() bool { sent, _ := a.LastRenew(); return sent.After(up) })
	t.Logf("outage %s; a renewed %s after the API server was ready",
		up.Sub(stopped).Round(time.Millisecond), time.Since(up).Round(time.Millisecond))
	testwait.True(t, waitTimeout, "b Synced", b.Synced)
	t.Logf("b (started during the outage) Synced %s after the API server was ready", time.Since(up).Round(time.Millisecond))
	testwait.True(t, waitTimeout, "a to see b", func() bool { _, ok := observedByName(a.Snapshot(), "demo-b"); return ok })
	t.Logf("a's view recovered %s after the API server was ready; a logged %d renew failures",
		time.Since(up).Round(time.Millisecond), logA.count("renewing own Lease failed"))
	if a.returned() || b.returned() {
		t.Fatalf("an outage stopped a member: a %v, b %v", a.err, b.err)
	}
}
