package membership

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/lease"
)

// errLeft reports a write refused because Delete was called.
var errLeft = errors.New("lease: not writing the own Lease: Delete was called")

// Backoff bounds for retrying failed requests.
const (
	acquireBackoffInitial = 250 * time.Millisecond
	acquireBackoffMax     = 5 * time.Second
	// stillWaitingLog is how often a wait for another incarnation's Lease to
	// expire is logged again.
	stillWaitingLog = time.Minute
)

// Run acquires the own Lease, then renews it every RenewPeriod (and promptly
// after SetDesired changes the record) until ctx is done, while watching
// every Lease of the ring. Transient API errors are logged and retried with
// backoff. Run never decides about other writers of the own Lease: it
// overwrites only versions this process wrote or the caller allowed with
// TakeOver (the handoff core decides), recreates the Lease when someone
// deleted it, and puts back the ring label when someone removed it. Run
// returns nil when ctx is done, without deleting the Lease (leaving is the
// caller's decision, see Delete); it returns a *ForbiddenError when RBAC
// refuses a request, and an error wrapping ErrNameTaken when the own Lease
// name is used by something that is not a member Lease of this identity.
// Run may be called once.
func (m *Member) Run(ctx context.Context) error {
	if !m.started.CompareAndSwap(false, true) {
		return errors.New("lease: Member.Run called more than once; create a new Member for every run")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	m.mu.Lock()
	m.cancelRun = cancel
	m.mu.Unlock()

	var wg sync.WaitGroup
	wg.Go(func() { m.peers.run(ctx) })
	wg.Go(func() { m.joinScan(ctx) })

	var err error
	for ctx.Err() == nil {
		var immediate bool
		if immediate, err = m.acquire(ctx); err != nil {
			break
		}
		// heartbeat returns errNotOurs when another writer holds the Lease
		// now: back to waiting for the core's TakeOver.
		if err = m.heartbeat(ctx, immediate); !errors.Is(err, errNotOurs) {
			break
		}
		err = nil
	}
	if err != nil {
		m.fail(err)
	}
	cancel(nil)
	wg.Wait()

	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fatal
}

// acquire takes the own Lease: creates it, adopts it when an earlier write of
// this process landed unseen, or takes it over from another incarnation once
// that incarnation's Lease has not changed for its lease duration. It returns
// nil when ctx is done, and immediate when the heartbeat should write at once.
func (m *Member) acquire(ctx context.Context) (immediate bool, err error) {
	bo := newBackoff(acquireBackoffInitial, acquireBackoffMax)
	// A failure that repeats (a missing namespace, say) is logged when it
	// first appears, when it changes and then once per stillWaitingLog,
	// not on every retry.
	var logged struct {
		msg string
		at  time.Time
	}
	retry := func(err error, msg string) bool {
		d := bo.Step()
		m.setAcquireError(err)
		now := m.clock.Now()
		if line := msg + ": " + err.Error(); line != logged.msg || now.Sub(logged.at) >= stillWaitingLog {
			logged.msg, logged.at = line, now
			m.log.Error(err, msg, "retryIn", d.Round(time.Millisecond))
		} else {
			m.log.V(1).Info(msg, "error", err.Error(), "retryIn", d.Round(time.Millisecond))
		}
		return m.sleep(ctx, d)
	}
	// Another incarnation's Lease this process waits for: its incarnation
	// and when (locally) that was last logged.
	var held struct {
		incarnation string
		logged      time.Time
	}
	for ctx.Err() == nil && !m.hasLeft() {
		cur, err := m.getOwn(ctx)
		switch {
		case ctx.Err() != nil:
			return false, nil
		case apierrors.IsNotFound(err):
			v, err := m.writeLocked(ctx, nil, true)
			switch {
			case err == nil:
				m.log.Info("created own Lease", "incarnation", m.opts.Incarnation)
				return !v.Renewed, nil
			case v.ReadOwn || ctx.Err() != nil || errors.Is(err, errLeft):
				continue // someone created it: read it again
			case v.Fatal:
				return false, newForbiddenError(err, "create", m.opts.Namespace, m.name)
			case !retry(explainCreateError(err, m.opts.Namespace), "creating own Lease failed; retrying"):
				return false, nil
			}
			continue
		case apierrors.IsForbidden(err):
			return false, newForbiddenError(err, "get", m.opts.Namespace, m.name)
		case err != nil:
			if !retry(err, "reading own Lease failed (is the API server reachable?); retrying") {
				return false, nil
			}
			continue
		}
		bo = newBackoff(acquireBackoffInitial, acquireBackoffMax)
		m.setAcquireError(nil)

		// What the Lease read means is the handoff core's decision
		// (handoff.JudgeAcquire); this only carries it out.
		read := handoff.OwnLease{OwnRead: handoff.OwnRead{Found: true, Incarnation: cur.Annotations[AnnotationIncarnation], Version: cur.ResourceVersion},
			Ring: cur.Labels[lease.LabelRing]}
		if cur.Spec.HolderIdentity != nil {
			read.Holder = *cur.Spec.HolderIdentity
		}
		inc := read.Incarnation
		switch handoff.JudgeAcquire(m.opts.Ring, m.opts.Identity, m.opts.Incarnation, m.takeOverVersion(), read) {
		case handoff.AcquireNameTaken:
			return false, fmt.Errorf("%w: Lease %s/%s exists but is not a member Lease of ring %q (label %s=%q, holder %q): "+
				"another ring or tool uses this name; choose ring names whose <ring>-<identity> Lease names do not collide",
				ErrNameTaken, m.opts.Namespace, m.name, m.opts.Ring, lease.LabelRing, read.Ring, read.Holder)
		case handoff.AcquireRestoreLabel:
			err := m.restoreLabel(ctx, cur)
			switch {
			case err == nil:
				m.log.Info("restored the ring label of this identity's Lease, removed by someone else", "label", read.Ring)
			case apierrors.IsForbidden(err):
				return false, newForbiddenError(err, "update", m.opts.Namespace, m.name)
			case !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && !retry(err, "restoring the ring label of the own Lease failed; retrying"):
				return false, nil
			}
			continue
		case handoff.AcquireAdopt:
			m.mu.Lock()
			m.current, m.acquired = cur, true
			m.written = recordOf(cur, m.opts.Ring, m.opts.Partitions)
			m.mu.Unlock()
			m.notify()
			m.log.Info("adopted own Lease written by an earlier request of this process")
			return true, nil
		case handoff.AcquireWait:
			now := m.clock.Now()
			if inc != held.incarnation || now.Sub(held.logged) >= stillWaitingLog {
				held.incarnation, held.logged = inc, now
				m.log.Info(fmt.Sprintf("Lease %s/%s is held by another process (incarnation %q); waiting until it has expired — two replicas with the same identity?",
					m.opts.Namespace, m.name, inc), "incarnation", m.opts.Incarnation)
			}
			t := m.clock.NewTimer(m.opts.RenewPeriod)
			select {
			case <-ctx.Done():
				t.Stop()
				return false, nil
			case <-m.takeOverCh:
				t.Stop()
			case <-t.C():
			}
			continue
		}
		// AcquireTakeOver (a found Lease is never AcquireCreate): overwrite
		// exactly the version the core judged.
		v, err := m.writeLocked(ctx, cur, true)
		switch {
		case err == nil:
			m.log.Info("took over own Lease", "previous", inc, "version", cur.ResourceVersion)
			return !v.Renewed, nil
		case v.ReadOwn || v.Recreate || ctx.Err() != nil || errors.Is(err, errLeft):
			continue // it changed or went: read it again
		case v.Fatal:
			return false, newForbiddenError(err, "update", m.opts.Namespace, m.name)
		case !retry(err, "taking over own Lease failed; retrying"):
			return false, nil
		}
	}
	return false, nil
}

// restoreLabel puts the ring label back on the own Lease, conditioned on
// cur's version, changing nothing else.
func (m *Member) restoreLabel(ctx context.Context, cur *coordinationv1.Lease) error {
	m.writeMu.Lock()
	defer m.writeMu.Unlock()
	if m.hasLeft() {
		return errLeft
	}
	l := cur.DeepCopy()
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[lease.LabelRing] = m.opts.Ring
	rctx, cancel := context.WithTimeout(ctx, m.opts.RenewTimeout)
	defer cancel()
	_, err := m.leases.Update(rctx, l, metav1.UpdateOptions{})
	return err
}

// heartbeat renews the own Lease every RenewPeriod, promptly when the desired
// record changed, and with backoff after failures. It returns a fatal error,
// or nil when ctx is done.
func (m *Member) heartbeat(ctx context.Context, immediate bool) error {
	bo := newBackoff(m.opts.RenewPeriod/8, m.opts.RenewPeriod)
	next := m.clock.Now()
	if sent, ok := m.LastRenew(); ok && !immediate {
		next = sent.Add(m.opts.RenewPeriod)
	}
	failing, failures := false, 0
	for ctx.Err() == nil {
		if m.hasLeft() {
			// Delete was called: the Lease is no longer ours to write.
			<-ctx.Done()
			return nil
		}
		wait := next.Sub(m.clock.Now())
		if !failing && m.dirty() {
			wait = 0
		}
		if wait > 0 {
			t := m.clock.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-m.wake:
				t.Stop()
				continue
			case <-t.C():
			}
		}

		counted, err := m.renew(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case m.hasLeft():
			continue
		case isFatal(err) || errors.Is(err, errNotOurs):
			return err
		case counted:
			if failing {
				m.log.Info("renewing own Lease again", "failedAttempts", failures)
			}
			failing, failures = false, 0
			bo = newBackoff(m.opts.RenewPeriod/8, m.opts.RenewPeriod)
			sent, _ := m.LastRenew()
			next = sent.Add(m.opts.RenewPeriod)
		default:
			failing = true
			failures++
			d := bo.Step()
			next = m.clock.Now().Add(d)
			since := "never"
			if sent, ok := m.LastRenew(); ok {
				since = m.clock.Since(sent).Round(time.Millisecond).String()
			}
			if err == nil {
				err = errors.New("response arrived after RenewTimeout")
			}
			m.log.Error(err, "renewing own Lease failed; retrying", "attempt", failures, "sinceLastRenew", since, "retryIn", d.Round(time.Millisecond))
			m.notify()
		}
	}
	return nil
}

// dirty reports whether the desired record differs from the written one.
func (m *Member) dirty() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.desired.Equal(m.written)
}

// renew writes the own Lease once. After a conflict it re-reads the Lease
// and retries once if the version is its own (a write whose response was
// lost, or someone's label) or one the core allowed it to take over; when
// the Lease is gone (deleted by hand, or collected by a peer) it creates it
// again: the core has fenced and counts only renews sent after it saw the
// loss. counted reports a write that counts as a renew; err is a fatal
// error, errNotOurs, or the transient cause of failure.
func (m *Member) renew(ctx context.Context) (counted bool, err error) {
	m.writeMu.Lock()
	defer m.writeMu.Unlock()
	for attempt := 0; ; attempt++ {
		if m.hasLeft() {
			return false, nil
		}
		m.mu.Lock()
		base := m.current
		m.mu.Unlock()
		// What the write means is the handoff core's decision
		// (handoff.JudgeWrite); this only carries it out.
		var v handoff.WriteVerdict
		v, err = m.write(ctx, base, false)
		switch {
		case err == nil || ctx.Err() != nil:
			return v.Renewed, err
		case v.Fatal:
			return false, newForbiddenError(err, "update", m.opts.Namespace, m.name)
		case v.Recreate && attempt == 0:
			m.log.Info("own Lease was deleted by someone else; creating it again")
			m.mu.Lock()
			m.current = nil
			m.mu.Unlock()
			continue
		case !v.ReadOwn || attempt > 0:
			return false, err
		}
		cur, gerr := m.getOwn(ctx)
		read := handoff.OwnRead{Found: true}
		switch {
		case apierrors.IsNotFound(gerr):
			read.Found = false
		case apierrors.IsForbidden(gerr):
			return false, newForbiddenError(gerr, "get", m.opts.Namespace, m.name)
		case gerr != nil:
			return false, fmt.Errorf("re-reading own Lease after a conflict: %w", gerr)
		default:
			read.Incarnation, read.Version = cur.Annotations[AnnotationIncarnation], cur.ResourceVersion
		}
		switch handoff.JudgeOwnRead(m.opts.Incarnation, m.takeOverVersion(), read) {
		case handoff.OwnCreate:
			m.mu.Lock()
			m.current = nil
			m.mu.Unlock()
		case handoff.OwnNotOurs:
			// Not ours to write: the core sees it through the watch and
			// decides (a duplicate identity stops it).
			m.mu.Lock()
			m.acquired = false
			m.mu.Unlock()
			m.notify()
			return false, errNotOurs
		default:
			m.mu.Lock()
			m.current = cur
			m.mu.Unlock()
		}
	}
}

// writeLocked is write under writeMu, refusing once Delete was called.
func (m *Member) writeLocked(ctx context.Context, base *coordinationv1.Lease, acquire bool) (handoff.WriteVerdict, error) {
	m.writeMu.Lock()
	defer m.writeMu.Unlock()
	if m.hasLeft() {
		return handoff.WriteVerdict{}, errLeft
	}
	return m.write(ctx, base, acquire)
}

// write sends one write of the own Lease publishing the desired record:
// a Create when base is nil, else an Update conditioned on base's
// resourceVersion. The caller holds writeMu. It reports what happened to the
// handoff core's JudgeWrite and returns its verdict: Renewed makes the send
// time the new LastRenew.
func (m *Member) write(ctx context.Context, base *coordinationv1.Lease, acquire bool) (v handoff.WriteVerdict, err error) {
	m.mu.Lock()
	rec := m.desired.Clone()
	m.mu.Unlock()

	sentAt := m.clock.Now()
	obj := m.render(base, rec, sentAt, acquire)
	rctx, cancel := context.WithTimeout(ctx, m.opts.RenewTimeout)
	defer cancel()
	var out *coordinationv1.Lease
	if base == nil {
		out, err = m.leases.Create(rctx, obj, metav1.CreateOptions{})
	} else {
		out, err = m.leases.Update(rctx, obj, metav1.UpdateOptions{})
	}
	// The context bounds real time; JudgeWrite's check of the answer's
	// time also holds for an injected clock and for a client that ignores
	// its context.
	v = handoff.JudgeWrite(m.opts.RenewTimeout, handoff.WriteResult{
		Status: writeStatus(err), SentAt: sentAt, AnsweredAt: m.clock.Now(), Sent: rec,
	})
	if !v.Landed {
		m.metrics.renewErrors.Inc()
		return v, err
	}
	counted := v.Renewed

	m.mu.Lock()
	m.current, m.written, m.acquireErr = out, rec, nil
	if acquire {
		m.acquired = true
	}
	if counted {
		m.lastRenew, m.renewed = sentAt, true
	}
	m.mu.Unlock()
	if counted {
		m.metrics.renews.Inc()
	} else {
		m.metrics.renewErrors.Inc()
	}
	m.notify()
	return v, nil
}

// writeStatus is what the API server's answer to a write of the own Lease
// was, for handoff.JudgeWrite.
func writeStatus(err error) handoff.WriteStatus {
	switch {
	case err == nil:
		return handoff.WriteOK
	case apierrors.IsConflict(err):
		return handoff.WriteConflict
	case apierrors.IsAlreadyExists(err):
		return handoff.WriteExists
	case apierrors.IsNotFound(err):
		return handoff.WriteGone
	case apierrors.IsForbidden(err):
		return handoff.WriteForbidden
	case errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err):
		return handoff.WriteTimeout
	default:
		return handoff.WriteFailed
	}
}

// getOwn reads the own Lease directly, bounded by RenewTimeout.
func (m *Member) getOwn(ctx context.Context) (*coordinationv1.Lease, error) {
	rctx, cancel := context.WithTimeout(ctx, m.opts.RenewTimeout)
	defer cancel()
	return m.leases.Get(rctx, m.name, metav1.GetOptions{})
}

// sleep waits d on the Member's clock; false when ctx ended first.
func (m *Member) sleep(ctx context.Context, d time.Duration) bool {
	t := m.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// newBackoff returns exponentially growing delays from initial to max, with
// up to 20% jitter so that replicas failing together do not retry in step.
// Reset by assigning a new one.
func newBackoff(initial, max time.Duration) wait.Backoff {
	return wait.Backoff{Duration: initial, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: max}
}
