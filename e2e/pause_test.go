package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kshard/kshard/e2e/harness"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
)

// TestPausedReplicaSendsNoBackgroundWriteBeforeRenewing pauses (SIGSTOP) a
// replica whose goroutines keep patching a ConfigMap with
// context.Background(), so no reconcile's validity covers those writes,
// and continues it: once past its lease validity, and once until its peers
// have taken its partitions over (the replica then exits on SIGCONT, as a
// fenced replica past its stop deadline must). From SIGCONT until its first
// renewal of its Lease has landed, none of the writes it builds may land:
// its clients refuse them until a renewal re-establishes the validity (a
// write built before SIGSTOP may, having passed the fence before the pause
// stopped it on its way: each write says when it was built). Its
// Lease renewals themselves must not be refused, or it would never be
// valid again; after the short pause its writes land again.
//
// What landed, and in which order, is read from the API server itself: one
// watch on the ConfigMap and one on the replica's Lease, from a
// resourceVersion before the pause. The resourceVersions of a control plane
// on one etcd are its revisions, one total order over every kind, so a
// write ordered after a marker the test writes just before SIGCONT was sent
// after SIGCONT, and one ordered before the Lease renewal landed before it.
func TestPausedReplicaSendsNoBackgroundWriteBeforeRenewing(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: runs a control plane and three replicas for about a minute")
	}
	cp := controlplane.ForTest(t, controlplane.Options{})
	// A stop deadline (halfway from RenewDeadline to LeaseDuration, 6.5s)
	// well after the renew deadline, so that a pause just past the
	// validity does not make the replica exit.
	h := harness.New(t, cp, harness.Options{Ring: "pause", LeaseDuration: 10 * time.Second, RenewDeadline: 3 * time.Second, BackgroundWrite: 2 * time.Millisecond})
	ids := []string{harness.Identity(0), harness.Identity(1), harness.Identity(2)}
	victim := ids[1]
	ns := h.Options().Namespace
	h.StartReady(ids...)
	t.Logf("ring converged: %s", h.WaitConverged(convergeTimeout))
	proc := h.Replica(victim).Process

	ctx, cancel := context.WithCancel(context.Background())
	from := currentRevision(t, h)
	writes := watchRevisions(ctx, t, "ConfigMap "+harness.BackgroundName(victim), from, h.Client().CoreV1().ConfigMaps(ns).Watch, harness.BackgroundName(victim))
	renewals := watchRevisions(ctx, t, "Lease "+h.LeaseName(victim), from, h.Client().CoordinationV1().Leases(ns).Watch, h.LeaseName(victim))
	t.Cleanup(func() { cancel(); writes.wait(); renewals.wait() })
	landing := func(after int64, what string) {
		t.Helper()
		h.Await(30*time.Second, victim+"'s background writes landing "+what, func() error {
			if n := len(writes.after(after)); n < 20 {
				return fmt.Errorf("%d landed", n)
			}
			return nil
		})
	}
	landing(from, "before the pause")

	// After SIGCONT the replica's renewal and its background writer race:
	// when the renewal lands before the writer's next attempt, nothing is
	// refused and the rule went unexercised (seen once in fifteen CI
	// rehearsals). Every pause checks that no write landed early; the
	// pause is repeated until one also shows a write refused.
	const shortPauses = 3
	for attempt := 1; ; attempt++ {
		t.Logf("pause %d just past the lease validity: the replica survives and must renew before it writes", attempt)
		base := refusedSoFar(t, h, victim)
		stopped := h.Pause(victim)
		// The pause's length is the fault itself: its last renewal was
		// sent before SIGSTOP, so its validity has passed RenewDeadline
		// after it.
		h.Await(time.Minute, victim+"'s lease validity passing", func() error {
			if wait := time.Until(stopped.Add(h.Options().RenewDeadline + 200*time.Millisecond)); wait > 0 {
				return fmt.Errorf("%s to go", wait.Round(time.Millisecond))
			}
			return nil
		})
		renewal, refused := resumeAndCheck(t, h, victim, stopped, base, writes, renewals)
		if _, exited := h.Replica(victim).Exited(); exited {
			t.Fatalf("%s exited after a pause just past its lease validity; it must renew and go on", victim)
		}
		landing(renewal, "after its renewal")
		if refused > 0 {
			break
		}
		if attempt == shortPauses {
			t.Errorf("no write of %s was refused after %d pauses: its fence let its writes pass, or the test did not exercise the rule", victim, shortPauses)
			break
		}
		t.Logf("no write refused: its renewal may have landed before its background writer tried again; pausing again")
	}

	t.Log("pause until the peers have taken the replica's partitions over")
	base := refusedSoFar(t, h, victim)
	stopped := h.Pause(victim)
	h.Await(4*h.Options().LeaseDuration, "peers taking "+victim+"'s partitions over", func() error {
		_, held, err := h.Log().Takeover(proc, stopped)
		if err == nil && len(held) == 0 {
			return errors.New(victim + " held no partitions when paused")
		}
		return err
	})
	if _, refused := resumeAndCheck(t, h, victim, stopped, base, writes, renewals); refused == 0 {
		t.Errorf("no write of %s was refused after the long pause, and it did not exit: the test did not exercise the rule", victim)
	}
}

// resumeAndCheck writes a marker, continues the paused victim and waits
// for its first Lease renewal after the marker; it fails the test if a
// background write of the victim landed between the two, and returns the
// renewal's revision and the writes refused since the pause (-1: the
// victim exited, not scraped). refusedBefore is the victim's refusal count
// before the pause.
func resumeAndCheck(t *testing.T, h *harness.Harness, victim string, stopped time.Time, refusedBefore int, writes, renewals *revisions) (int64, int) {
	t.Helper()
	// Writes after the marker are the victim's from the pause on: those
	// its connection had taken before SIGSTOP have landed by now (seconds
	// have passed); one the process still held lands after SIGCONT and is
	// told apart below by the time it was built.
	mark := writeMarker(t, h)
	// The victim is stopped now: a write it built before this instant was
	// built before SIGSTOP.
	beforeResume := time.Now()
	resumed := h.Resume(victim)
	// The renewal after SIGCONT, or, for a replica that exited before
	// renewing, none: every write after the marker was then early.
	renewal := revision{rv: math.MaxInt64}
	h.Await(30*time.Second, victim+" renewing its Lease or exiting after SIGCONT", func() error {
		if after := renewals.after(mark); len(after) > 0 {
			renewal = after[0]
			return nil
		}
		if _, exited := h.Replica(victim).Exited(); !exited {
			return errors.New("no write of its Lease after SIGCONT yet")
		}
		// Exited: its Lease tells whether a renewal landed that the
		// watch has yet to deliver.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l, err := h.Client().CoordinationV1().Leases(h.Options().Namespace).Get(ctx, h.LeaseName(victim), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if rv, err := strconv.ParseInt(l.ResourceVersion, 10, 64); err != nil || rv > mark {
			return fmt.Errorf("its Lease was written at %s after SIGCONT; awaiting the watch", l.ResourceVersion)
		}
		return nil
	})
	// A write built before the pause may have passed the fence then and
	// been stopped with the process on its way to the connection: it lands
	// after SIGCONT, a documented limit (shard/fence, "What remains").
	// Every write built after SIGCONT went through the fence after it.
	early, inFlight := 0, 0
	for _, w := range writes.after(mark) {
		switch {
		case w.rv > renewal.rv:
		case w.built.IsZero():
			t.Errorf("background write at revision %d carries no %s annotation", w.rv, harness.BackgroundBuilt)
		case w.built.Before(beforeResume):
			inFlight++
		default:
			early++
		}
	}
	refused := -1 // unknown: the replica exited
	h.Await(30*time.Second, "the replica's writes to settle after its renewal", func() error {
		if r := h.Replica(victim); r == nil {
			return nil
		} else if _, exited := r.Exited(); exited {
			return nil
		}
		if len(writes.after(renewal.rv)) == 0 {
			return errors.New("no write after the renewal yet")
		}
		refused = metricValue(t, scrapeMetrics(t, h, victim), `kshard_writes_refused_total{reason="replica"}`) - refusedBefore
		return nil
	})
	exit := "running"
	if x, exited := h.Replica(victim).Exited(); exited {
		exit = fmt.Sprintf("exited with code %d", x.Code)
	}
	renewed := "never renewed its Lease"
	if renewal.rv != math.MaxInt64 {
		renewed = fmt.Sprintf("its Lease renewed %s after SIGCONT", renewal.seen.Sub(resumed).Round(time.Millisecond))
	}
	t.Logf("SUMMARY %s paused %s, then %s: %s; %d background writes refused (-1: exited, not scraped), %d built after SIGCONT landed before the renewal (or exit), %d built before SIGSTOP landed after SIGCONT (in flight), %d after",
		victim, resumed.Sub(stopped).Round(time.Millisecond), exit, renewed, refused, early, inFlight, len(writes.after(mark))-early-inFlight)
	if early > 0 {
		t.Errorf("%d background writes of %s built after SIGCONT landed before its Lease renewal: they were sent while its lease validity had passed", early, victim)
	}
	return renewal.rv, refused
}

// refusedSoFar returns the victim's count of refused writes without a
// reconcile context so far; it must be running, not paused.
func refusedSoFar(t *testing.T, h *harness.Harness, victim string) int {
	t.Helper()
	return metricValue(t, scrapeMetrics(t, h, victim), `kshard_writes_refused_total{reason="replica"}`)
}

// revision is one write of an object as a watch delivered it: its
// resourceVersion (an etcd revision), when the test saw it and, for a
// background write, when the replica built it (harness.BackgroundBuilt).
type revision struct {
	rv    int64
	seen  time.Time
	built time.Time
}

// revisions collects what a watch delivers.
type revisions struct {
	done chan struct{} // closed when the watch has ended
	mu   sync.Mutex
	list []revision
}

func (r *revisions) wait() { <-r.done }

// after returns the writes at revisions above rv, in order.
func (r *revisions) after(rv int64) []revision {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []revision
	for _, w := range r.list {
		if w.rv > rv {
			out = append(out, w)
		}
	}
	return out
}

// watchRevisions runs watch from resourceVersion from until ctx ends,
// collecting the revision of every write it delivers. A watch that ends
// early fails the test: a write it missed could be the one that matters.
func watchRevisions(ctx context.Context, t *testing.T, what string, from int64, watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), name string) *revisions {
	t.Helper()
	w, err := watchFn(ctx, metav1.ListOptions{ResourceVersion: strconv.FormatInt(from, 10), FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatalf("watching %s: %v", what, err)
	}
	r := &revisions{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		defer w.Stop()
		for ev := range w.ResultChan() {
			obj, err := meta.Accessor(ev.Object)
			if ctx.Err() != nil {
				return
			}
			if ev.Type == watch.Error || err != nil {
				t.Errorf("watch of %s: %s %v", what, ev.Type, ev.Object)
				return
			}
			rv, err := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
			if err != nil {
				t.Errorf("watch of %s: resourceVersion %q: %v", what, obj.GetResourceVersion(), err)
				return
			}
			rev := revision{rv: rv, seen: time.Now()}
			if ns, err := strconv.ParseInt(obj.GetAnnotations()[harness.BackgroundBuilt], 10, 64); err == nil {
				rev.built = time.Unix(0, ns)
			}
			r.mu.Lock()
			r.list = append(r.list, rev)
			r.mu.Unlock()
		}
		if ctx.Err() == nil {
			t.Errorf("the watch of %s ended early", what)
		}
	}()
	return r
}

// currentRevision returns the control plane's current etcd revision: the
// resourceVersion of a list served from etcd.
func currentRevision(t *testing.T, h *harness.Harness) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := h.Client().CoreV1().ConfigMaps(h.Options().Namespace).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	rv, err := strconv.ParseInt(list.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatalf("list resourceVersion %q: %v", list.ResourceVersion, err)
	}
	return rv
}

// writeMarker writes a ConfigMap of the test's own and returns the
// revision it landed at: every write ordered after it was sent after it.
func writeMarker(t *testing.T, h *harness.Harness) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "pause-marker-", Namespace: h.Options().Namespace}}
	got, err := h.Client().CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("writing the marker: %v", err)
	}
	rv, err := strconv.ParseInt(got.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatalf("marker resourceVersion %q: %v", got.ResourceVersion, err)
	}
	return rv
}

// readLog returns the contents of a replica's log file.
func readLog(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
