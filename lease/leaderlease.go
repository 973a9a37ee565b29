package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kshard/kshard/internal/handoff"
)

// LeaderLeaseOptions configure a LeaderLease.
type LeaderLeaseOptions struct {
	// Client talks to the API server. Required.
	Client kubernetes.Interface
	// Namespace and Name are the leader-election Lease's: the replaced
	// operator's leader election ID and namespace. Required.
	Namespace, Name string
	// Ring names the ring; the Lease's holderIdentity becomes
	// "kshard-ring/<Ring>" (leaderLeaseHolder). Required.
	Ring string
	// LeaseDuration is the leaseDurationSeconds the ring writes, and the
	// expiry assumed for a Lease that states none. Required.
	LeaseDuration time.Duration
	// RenewPeriod is how often the ring writes the Lease again while it
	// holds it; the Lease is read twice as often. Required, below
	// LeaseDuration.
	RenewPeriod time.Duration
	// Logger defaults to logr.Discard().
	Logger logr.Logger
}

// leaderLeaseHolder is the holderIdentity a ring writes into a
// leader-election Lease it holds.
func leaderLeaseHolder(ring string) string { return "kshard-ring/" + ring }

// LeaderLease holds a leader-election Lease for a ring that replaces a
// leader-elected operator (handoff.JudgeLeaderLease): it takes the Lease
// once the old leader released it or let it expire, and renews it for as
// long as it runs. Every replica of the ring runs one; they write the same
// holder, so any of them renews it. It never releases the Lease: a replica
// cannot tell whether it is the ring's last, and once no replica renews it
// the Lease expires by itself.
type LeaderLease struct {
	opts  LeaderLeaseOptions
	log   logr.Logger
	holds chan struct{} // closed once the Lease was first held

	mu      sync.Mutex
	held    bool
	judged  bool      // a verdict was reached once
	reason  string    // why it is not held
	version string    // the resourceVersion last observed
	seenAt  time.Time // when version was first observed
	holder  string    // the holder last observed
	once    sync.Once
}

// NewLeaderLease validates opts and returns a LeaderLease; Run starts it.
func NewLeaderLease(opts LeaderLeaseOptions) (*LeaderLease, error) {
	var errs []error
	if opts.Client == nil {
		errs = append(errs, errors.New("Client is nil"))
	}
	if err := ValidateNamespace(opts.Namespace); err != nil {
		errs = append(errs, fmt.Errorf("Namespace %w", err))
	}
	if opts.Name == "" {
		errs = append(errs, errors.New("Name is empty: give the leader election ID of the operator the ring replaces"))
	}
	if err := ValidateRing(opts.Ring); err != nil {
		errs = append(errs, fmt.Errorf("Ring %w", err))
	}
	if opts.RenewPeriod <= 0 || opts.RenewPeriod >= opts.LeaseDuration {
		errs = append(errs, fmt.Errorf("RenewPeriod %s must be positive and below LeaseDuration %s", opts.RenewPeriod, opts.LeaseDuration))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: leader-election Lease: %w", ErrInvalidOptions, err)
	}
	log := opts.Logger
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	return &LeaderLease{opts: opts, log: log, holds: make(chan struct{}),
		reason: fmt.Sprintf("the leader-election Lease %s/%s has not been read yet", opts.Namespace, opts.Name)}, nil
}

// waitingPoll bounds how often a ring that does not hold the Lease reads
// it. The old leader releases it as it stops (LeaderElectionReleaseOnCancel)
// and nothing is reconciled until the ring has taken it, so the read, not
// the renewal, sets that gap: at RenewPeriod/2 (1.5 s with a 15 s
// LeaseDuration) it alone would use most of a 2 s budget. One GET of one
// Lease every 250 ms per replica, only while the ring waits.
const waitingPoll = 250 * time.Millisecond

// Run keeps the Lease held until ctx ends: it reads the Lease every
// RenewPeriod/2 while the ring holds it, and every waitingPoll at most
// while it waits for the old leader to stop.
func (l *LeaderLease) Run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.step(ctx)
		next := l.opts.RenewPeriod / 2
		if !l.Held() {
			next = min(next, waitingPoll)
		}
		t.Reset(next)
	}
}

// Held reports whether the ring holds the Lease now; Reason says why not.
func (l *LeaderLease) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held
}

// Reason says why the Lease is not held ("" while it is).
func (l *LeaderLease) Reason() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held {
		return ""
	}
	return l.reason
}

// WaitHeld blocks until the Lease was held once, and reports whether it
// was (false: ctx ended first).
func (l *LeaderLease) WaitHeld(ctx context.Context) bool {
	select {
	case <-l.holds:
		return true
	case <-ctx.Done():
		return false
	}
}

// step reads the Lease and carries out the verdict on it.
func (l *LeaderLease) step(ctx context.Context) {
	ring := leaderLeaseHolder(l.opts.Ring)
	leases := l.opts.Client.CoordinationV1().Leases(l.opts.Namespace)
	rctx, cancel := context.WithTimeout(ctx, l.opts.RenewPeriod)
	defer cancel()
	cur, err := leases.Get(rctx, l.opts.Name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		l.failed("reading", err)
		return
	}
	now := time.Now()
	obs := l.observe(cur, now)
	switch handoff.JudgeLeaderLease(ring, obs, l.opts.RenewPeriod, l.opts.LeaseDuration) {
	case handoff.LeaderLeaseHeld:
		l.set(true, "")
	case handoff.LeaderLeaseWait:
		l.set(false, fmt.Sprintf("the leader-election Lease %s/%s is held by %q (unchanged for %s): the ring activates nothing until that leader has stopped (scale the leader-elected Deployment to zero)",
			l.opts.Namespace, l.opts.Name, obs.Holder, obs.Unchanged.Round(time.Second)))
	case handoff.LeaderLeaseTake:
		written, err := l.write(rctx, cur, now)
		switch {
		case err == nil:
			l.mu.Lock()
			l.version, l.seenAt, l.holder = written.ResourceVersion, now, ring
			l.mu.Unlock()
			if obs.Holder != ring {
				l.log.Info("took the leader-election Lease: the replaced leader has stopped", "lease", l.opts.Namespace+"/"+l.opts.Name, "previous", obs.Holder)
			}
			l.set(true, "")
		case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
			// A peer wrote it first, or the old leader renewed: read again.
			l.set(obs.HeldBy(ring, l.opts.LeaseDuration), fmt.Sprintf("the leader-election Lease %s/%s changed while the ring wrote it", l.opts.Namespace, l.opts.Name))
		default:
			l.failed("writing", err)
		}
	}
}

// observe records cur's version (nil: none) and returns what the verdict
// needs, with its time unchanged on this replica's clock.
func (l *LeaderLease) observe(cur *coordinationv1.Lease, now time.Time) handoff.LeaderLease {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur == nil {
		l.version, l.holder = "", ""
		return handoff.LeaderLease{}
	}
	if cur.ResourceVersion != l.version {
		l.version, l.seenAt = cur.ResourceVersion, now
	}
	obs := handoff.LeaderLease{Found: true, Unchanged: now.Sub(l.seenAt)}
	if cur.Spec.HolderIdentity != nil {
		obs.Holder = *cur.Spec.HolderIdentity
	}
	if cur.Spec.LeaseDurationSeconds != nil {
		obs.Duration = time.Duration(*cur.Spec.LeaseDurationSeconds) * time.Second
	}
	l.holder = obs.Holder
	return obs
}

// write creates the Lease or updates cur (conditioned on its version) with
// the ring as holder, as client-go's leader election writes a record.
func (l *LeaderLease) write(ctx context.Context, cur *coordinationv1.Lease, now time.Time) (*coordinationv1.Lease, error) {
	ring := leaderLeaseHolder(l.opts.Ring)
	seconds := int32(l.opts.LeaseDuration.Round(time.Second) / time.Second)
	stamp := metav1.NewMicroTime(now)
	leases := l.opts.Client.CoordinationV1().Leases(l.opts.Namespace)
	if cur == nil {
		return leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: l.opts.Name, Namespace: l.opts.Namespace},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &ring, LeaseDurationSeconds: &seconds,
				AcquireTime: &stamp, RenewTime: &stamp},
		}, metav1.CreateOptions{})
	}
	next := cur.DeepCopy()
	if next.Spec.HolderIdentity == nil || *next.Spec.HolderIdentity != ring {
		transitions := int32(0)
		if next.Spec.LeaseTransitions != nil {
			transitions = *next.Spec.LeaseTransitions + 1
		}
		next.Spec.HolderIdentity, next.Spec.AcquireTime, next.Spec.LeaseTransitions = &ring, &stamp, &transitions
	}
	next.Spec.LeaseDurationSeconds, next.Spec.RenewTime = &seconds, &stamp
	return leases.Update(ctx, next, metav1.UpdateOptions{})
}

// failed records a failed read or write: the Lease stays held only while
// what was last observed still shows the ring holding it.
func (l *LeaderLease) failed(what string, err error) {
	l.mu.Lock()
	held := l.holder == leaderLeaseHolder(l.opts.Ring) && time.Since(l.seenAt) < l.opts.LeaseDuration
	l.mu.Unlock()
	reason := fmt.Sprintf("%s the leader-election Lease %s/%s failed: %v", what, l.opts.Namespace, l.opts.Name, err)
	if apierrors.IsForbidden(err) {
		reason += " (grant get, create and update on leases in that namespace)"
	}
	l.set(held, reason)
}

// set records whether the Lease is held, logging when the ring starts
// waiting for it (once per wait, not every read).
func (l *LeaderLease) set(held bool, reason string) {
	l.mu.Lock()
	startsWaiting := !held && (l.held || !l.judged)
	l.held, l.judged = held, true
	if !held {
		l.reason = reason
	}
	l.mu.Unlock()
	if held {
		l.once.Do(func() { close(l.holds) })
	}
	if startsWaiting {
		l.log.Info("waiting for the leader-election Lease", "reason", reason)
	}
}
