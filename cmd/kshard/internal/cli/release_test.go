package cli

import (
	"bytes"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/shard"
)

var leasesGVR = coordinationv1.SchemeGroupVersion.WithResource("leases")

// fakeLeases is client-go's fake clientset made as strict about Leases as
// the API server: an update with a stale resourceVersion fails with
// Conflict, every write gets a new resourceVersion, and a terminating Lease
// whose last finalizer goes is deleted. hook, when set, runs first on every
// Lease request (with the Lease's name) and may fail it or change the
// stored Lease.
type fakeLeases struct {
	*fake.Clientset

	mu      sync.Mutex
	rv      int
	hook    func(verb, name string) error
	gets    map[string]int          // get requests, by Lease name
	updates []*coordinationv1.Lease // the objects sent in update requests
}

func newFakeLeases(t *testing.T, leases ...coordinationv1.Lease) *fakeLeases {
	t.Helper()
	f := &fakeLeases{Clientset: fake.NewClientset(), rv: 100, gets: map[string]int{}}
	tracker := f.Tracker()
	for i := range leases {
		l := leases[i].DeepCopy()
		f.rv++
		l.ResourceVersion = strconv.Itoa(f.rv)
		l.UID = types.UID("uid-" + l.Name)
		if err := tracker.Add(l); err != nil {
			t.Fatal(err)
		}
	}
	f.PrependReactor("update", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		obj := a.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		f.mu.Lock()
		defer f.mu.Unlock()
		f.updates = append(f.updates, obj.DeepCopy())
		cur, err := tracker.Get(leasesGVR, a.GetNamespace(), obj.Name)
		if err != nil {
			return true, nil, err
		}
		if obj.ResourceVersion != cur.(*coordinationv1.Lease).ResourceVersion {
			return true, nil, apierrors.NewConflict(leasesGVR.GroupResource(), obj.Name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
		}
		f.rv++
		obj.ResourceVersion = strconv.Itoa(f.rv)
		if obj.DeletionTimestamp != nil && len(obj.Finalizers) == 0 {
			return true, obj, tracker.Delete(leasesGVR, a.GetNamespace(), obj.Name)
		}
		return true, obj, tracker.Update(leasesGVR, obj, a.GetNamespace())
	})
	// Prepended last, so that it runs first.
	f.PrependReactor("*", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		name := ""
		switch a := a.(type) {
		case clienttesting.GetAction:
			name = a.GetName()
		case clienttesting.UpdateAction:
			name = a.GetObject().(*coordinationv1.Lease).Name
		}
		f.mu.Lock()
		if a.GetVerb() == "get" {
			f.gets[name]++
		}
		hook := f.hook
		f.mu.Unlock()
		if hook != nil {
			if err := hook(a.GetVerb(), name); err != nil {
				return true, nil, err
			}
		}
		return false, nil, nil
	})
	return f
}

// renew writes the stored Lease name as its holder would: a new
// resourceVersion. It is for hooks, which run within a request.
func (f *fakeLeases) renew(t *testing.T, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	obj, err := f.Tracker().Get(leasesGVR, "from-context", name)
	if err != nil {
		t.Error(err)
		return
	}
	l := obj.(*coordinationv1.Lease).DeepCopy()
	f.rv++
	l.ResourceVersion = strconv.Itoa(f.rv)
	now := metav1.NowMicro()
	l.Spec.RenewTime = &now
	if err := f.Tracker().Update(leasesGVR, l, "from-context"); err != nil {
		t.Error(err)
	}
}

// stored returns the Lease name as stored, or nil when it is gone.
func (f *fakeLeases) stored(t *testing.T, name string) *coordinationv1.Lease {
	t.Helper()
	obj, err := f.Tracker().Get(leasesGVR, "from-context", name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*coordinationv1.Lease)
}

func (f *fakeLeases) sentUpdates() []*coordinationv1.Lease {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.updates)
}

func (f *fakeLeases) getsOf(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets[name]
}

// runFake runs the command line args against f, as Main does with a real
// cluster.
func runFake(t *testing.T, f *fakeLeases, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := &env{stdout: &stdout, stderr: &stderr, connect: func(g *globals) (*cluster, error) {
		ns := g.namespace()
		if ns == "" {
			ns = "from-context"
		}
		return newCluster(&rest.Config{Host: "https://fake"}, f, ns, g), nil
	}}
	code := e.main(append([]string{"kshard"}, args...))
	return code, stdout.String(), stderr.String()
}

// finalized is a member Lease of ring ops with the member finalizer, a
// claim of every partition and, when terminating, a pending deletion.
func finalized(id string, terminating bool) coordinationv1.Lease {
	l := member(id, "active", shard.FullPartitionSet(271))
	l.Labels[membership.LabelPartitions] = "271"
	l.Finalizers = []string{membership.FinalizerMember}
	if terminating {
		now := metav1.Now()
		l.DeletionTimestamp = &now
	}
	return l
}

// contains asserts that s contains every one of want.
func contains(t *testing.T, what, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("%s does not contain %q:\n%s", what, w, s)
		}
	}
}

// checkReleased asserts that u, the object of an update, releases the
// Lease: no member finalizer, an empty claim over 271 partitions, label
// partitions 0, conditioned on resourceVersion version.
func checkReleased(t *testing.T, u *coordinationv1.Lease, version string) {
	t.Helper()
	if slices.Contains(u.Finalizers, membership.FinalizerMember) {
		t.Errorf("update of %s keeps the finalizer: %v", u.Name, u.Finalizers)
	}
	if got, want := u.Annotations[membership.AnnotationClaim], membership.EncodeClaim(shard.NewPartitionSet(271)); got != want {
		t.Errorf("update of %s: claim %q, want the empty claim %q", u.Name, got, want)
	}
	if got := u.Labels[membership.LabelPartitions]; got != "0" {
		t.Errorf("update of %s: label %s=%q, want 0", u.Name, membership.LabelPartitions, got)
	}
	if u.ResourceVersion != version {
		t.Errorf("update of %s conditioned on resourceVersion %q, want the observed %q", u.Name, u.ResourceVersion, version)
	}
}

func TestReleaseQuietLease(t *testing.T) {
	gone := finalized("a", true)
	stays := finalized("b", false)
	stays.Finalizers = append(stays.Finalizers, "example.com/other")
	f := newFakeLeases(t, gone, stays)
	va, vb := f.stored(t, "ops-a").ResourceVersion, f.stored(t, "ops-b").ResourceVersion

	code, stdout, stderr := runFake(t, f, "release", "--ring", "ops", "a", "b", "--wait", "20ms")
	if code != 0 {
		t.Fatalf("exit code %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	contains(t, "stderr", stderr, "waiting 20ms (--wait) for the holders to renew ops-a, ops-b", "is not released")
	contains(t, "stdout", stdout, "LEASE", "ops-a  released  finalizer kshard.io/member removed, claim emptied; its deletion completes",
		"ops-b  released", "not being deleted, it stays")
	for _, name := range []string{"ops-a", "ops-b"} {
		if n := f.getsOf(name); n != 2 {
			t.Errorf("%s read %d times, want 2 (before and after the wait)", name, n)
		}
	}
	updates := f.sentUpdates()
	if len(updates) != 2 {
		t.Fatalf("%d updates, want 2", len(updates))
	}
	checkReleased(t, updates[0], va)
	checkReleased(t, updates[1], vb)
	if f.stored(t, "ops-a") != nil {
		t.Errorf("terminating ops-a still exists: its deletion should have completed")
	}
	b := f.stored(t, "ops-b")
	if b == nil || !slices.Equal(b.Finalizers, []string{"example.com/other"}) || b.Annotations[membership.AnnotationClaim] != membership.EncodeClaim(shard.NewPartitionSet(271)) {
		t.Errorf("ops-b stored as %+v, want only the other finalizer and an empty claim", b)
	}
}

// Without --wait, the wait is the Leases' spec.leaseDurationSeconds.
func TestReleaseWaitsLeaseDuration(t *testing.T) {
	l := finalized("a", true)
	secs := int32(1)
	l.Spec.LeaseDurationSeconds = &secs
	f := newFakeLeases(t, l)
	code, _, stderr := runFake(t, f, "release", "--ring=ops", "a")
	if code != 0 {
		t.Fatalf("exit code %d, stderr %q", code, stderr)
	}
	contains(t, "stderr", stderr, "waiting 1s (the longest spec.leaseDurationSeconds of these Leases)")
}

func TestReleaseRefusesChangedLease(t *testing.T) {
	f := newFakeLeases(t, finalized("a", true), finalized("b", true))
	// The holder of ops-a renews during the wait: the second read sees it.
	f.hook = func(verb, name string) error {
		if verb == "get" && name == "ops-a" && f.getsOf(name) == 2 {
			f.renew(t, name)
		}
		return nil
	}
	code, stdout, stderr := runFake(t, f, "release", "--ring", "ops", "a", "b", "--wait", "10ms")
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	contains(t, "stdout", stdout, "ops-a  changed", "changed while waiting", "its holder may be alive; not released", "ops-b  released")
	if !strings.HasSuffix(stderr, "kshard release: 1 of 2 Lease(s) not released (see above)\n") {
		t.Errorf("stderr %q does not end with the failure", stderr)
	}
	a := f.stored(t, "ops-a")
	if a == nil || !slices.Contains(a.Finalizers, membership.FinalizerMember) {
		t.Errorf("ops-a lost its finalizer: %+v", a)
	}
	for _, u := range f.sentUpdates() {
		if u.Name == "ops-a" {
			t.Errorf("ops-a was updated although it changed during the wait")
		}
	}
}

func TestReleaseForce(t *testing.T) {
	f := newFakeLeases(t, finalized("a", true))
	v := f.stored(t, "ops-a").ResourceVersion
	code, stdout, stderr := runFake(t, f, "release", "--ring", "ops", "a", "--force")
	if code != 0 {
		t.Fatalf("exit code %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	contains(t, "stderr", stderr, "warning: --force", "without waiting", "may go on reconciling its partitions while a new replica joins")
	if strings.Contains(stderr, "for the holders to renew") {
		t.Errorf("--force waited: %q", stderr)
	}
	contains(t, "stdout", stdout, "ops-a  released")
	if n := f.getsOf("ops-a"); n != 1 {
		t.Errorf("ops-a read %d times, want 1", n)
	}
	if u := f.sentUpdates(); len(u) != 1 {
		t.Errorf("%d updates, want 1", len(u))
	} else {
		checkReleased(t, u[0], v)
	}
}

// The update is conditioned on the version read: a write in between makes
// it fail, and the Lease keeps its finalizer.
func TestReleaseForceLosesRace(t *testing.T) {
	f := newFakeLeases(t, finalized("a", true))
	f.hook = func(verb, name string) error {
		if verb == "update" {
			f.renew(t, name)
		}
		return nil
	}
	code, stdout, _ := runFake(t, f, "release", "--ring", "ops", "a", "--force")
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	contains(t, "stdout", stdout, "ops-a  changed", "changed since resourceVersion", "not released")
	if a := f.stored(t, "ops-a"); a == nil || !slices.Contains(a.Finalizers, membership.FinalizerMember) {
		t.Errorf("ops-a lost its finalizer: %+v", a)
	}
}

func TestReleaseWithoutFinalizer(t *testing.T) {
	f := newFakeLeases(t, member("a", "active", shard.FullPartitionSet(271)))
	code, stdout, stderr := runFake(t, f, "release", "--ring", "ops", "a", "--wait", "1h")
	if code != 0 {
		t.Fatalf("exit code %d, stderr %q", code, stderr)
	}
	contains(t, "stdout", stdout, "ops-a  nothing-to-do  has no finalizer kshard.io/member: nothing to do")
	if stderr != "" {
		t.Errorf("stderr %q, want nothing (no wait)", stderr)
	}
	if u := f.sentUpdates(); len(u) != 0 {
		t.Errorf("%d updates, want none", len(u))
	}
}

func TestReleaseNotMember(t *testing.T) {
	other := finalized("x", true)
	other.Labels[lease.LabelRing] = "other"
	unlabelled := finalized("y", true)
	delete(unlabelled.Labels, lease.LabelRing)
	f := newFakeLeases(t, other, unlabelled)
	code, stdout, stderr := runFake(t, f, "release", "--ring", "ops", "x", "y", "--force")
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	contains(t, "stdout", stdout, `ops-x  not-member  not a member Lease of ring "ops" (it has label kshard.io/ring=other): not touched`,
		`ops-y  not-member  not a member Lease of ring "ops" (it has no label kshard.io/ring)`)
	contains(t, "stderr", stderr, "2 of 2 Lease(s) not released")
	if u := f.sentUpdates(); len(u) != 0 {
		t.Errorf("%d updates, want none", len(u))
	}
}

func TestReleaseNotFound(t *testing.T) {
	f := newFakeLeases(t, finalized("c", true), finalized("a", true))
	code, stdout, stderr := runFake(t, f, "release", "--ring", "ops", "b", "ops-a", "-o", "json")
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	contains(t, "stdout", stdout, `"lease": "ops-b"`, `"lease": "ops-ops-a"`, `"result": "not-found"`,
		`"message": "not found in namespace \"from-context\"; the identities of ring \"ops\" there: a, c"`)
	oneLineErr(t, stderr, "kshard release: 2 of 2 Lease(s) not released")
	if u := f.sentUpdates(); len(u) != 0 {
		t.Errorf("%d updates, want none", len(u))
	}

	empty := newFakeLeases(t)
	_, stdout, _ = runFake(t, empty, "release", "--ring", "ops", "a")
	contains(t, "stdout", stdout, `ops-a  not-found  not found in namespace "from-context"; ring "ops" has no Lease there`)
}

func TestReleaseAll(t *testing.T) {
	other := finalized("z", true)
	other.Name, other.Labels[lease.LabelRing] = "other-z", "other"
	quiet := member("c", "active", shard.FullPartitionSet(271)) // no finalizer
	f := newFakeLeases(t, finalized("b", true), finalized("a", false), quiet, other)
	code, stdout, stderr := runFake(t, f, "release", "--all", "--ring", "ops", "--wait", "10ms", "-n", "from-context")
	if code != 0 {
		t.Fatalf("exit code %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	contains(t, "stderr", stderr, "for the holders to renew ops-a, ops-b:")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[1], "ops-a  released") || !strings.HasPrefix(lines[2], "ops-b  released") ||
		!strings.HasPrefix(lines[3], "ops-c  nothing-to-do") {
		t.Errorf("stdout:\n%s", stdout)
	}
	if o := f.stored(t, "other-z"); o == nil || !slices.Contains(o.Finalizers, membership.FinalizerMember) {
		t.Errorf("the Lease of another ring was touched: %+v", o)
	}
	if n := f.getsOf("other-z"); n != 0 {
		t.Errorf("the Lease of another ring was read")
	}

	// A ring without Leases is an error that says so.
	code, _, stderr = runFake(t, f, "release", "--all", "--ring", "nope", "--force")
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	oneLineErr(t, stderr, `ring "nope" has no Lease in namespace "from-context"`, "rings here: ops, other")
}

func TestReleaseUndecodableClaim(t *testing.T) {
	l := finalized("a", false)
	l.Annotations[membership.AnnotationClaim] = "v9:271:zz"
	f := newFakeLeases(t, l)
	code, stdout, _ := runFake(t, f, "release", "--ring", "ops", "a", "--force")
	if code != 0 {
		t.Fatalf("exit code %d", code)
	}
	contains(t, "stdout", stdout, "claim annotation kshard.io/claim left as it was (it does not decode)")
	a := f.stored(t, "ops-a")
	if a.Annotations[membership.AnnotationClaim] != "v9:271:zz" || a.Labels[membership.LabelPartitions] != "271" || len(a.Finalizers) != 0 {
		t.Errorf("ops-a stored as %+v", a)
	}
}

func TestReleaseForbidden(t *testing.T) {
	f := newFakeLeases(t, finalized("a", true))
	f.hook = func(verb, name string) error {
		if verb == "update" {
			return apierrors.NewForbidden(leasesGVR.GroupResource(), name, errors.New(`User "jane" cannot update resource "leases"`))
		}
		return nil
	}
	code, stdout, stderr := runFake(t, f, "release", "--ring", "ops", "a", "--force")
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if stdout != "" {
		t.Errorf("stdout %q, want nothing (no Lease was done with)", stdout)
	}
	contains(t, "stderr", stderr, `updating Lease "ops-a" in namespace "from-context": forbidden for this user: it needs update on leases.coordination.k8s.io`,
		"kubectl auth can-i update leases -n from-context")

	// Through a real client: get is what is refused first.
	kc := fakeAPI(t, "from-context", nil, http.StatusForbidden)
	code, _, stderr = run(t, "release", "--kubeconfig", kc, "--ring", "ops", "a")
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	oneLineErr(t, stderr, "kshard release:", `reading Lease "ops-a"`, "it needs get on leases.coordination.k8s.io", "kubectl auth can-i get leases -n from-context")
}
