package membership

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/shard"
)

// Member is one replica's membership in a ring: its own Lease and its view of
// the ring's Leases. Create it with New and start it with Run; every other
// method is safe for concurrent use, before, during and after Run.
type Member struct {
	opts    Options // defaulted and validated
	name    string  // own Lease name
	leases  typedcoordinationv1.LeaseInterface
	clock   clock.WithTicker
	log     logr.Logger
	metrics *metrics
	peers   *peers

	changes    chan struct{} // cap 1: Changes()
	wake       chan struct{} // cap 1: SetDesired → heartbeat, a prompt write
	takeOverCh chan struct{} // cap 1: TakeOver → acquire
	started    atomic.Bool

	// writeMu serialises writes of the own Lease (acquisition, renews and
	// Delete): each write is conditioned on the resourceVersion the previous
	// one produced, and Delete must not race a renew that would recreate
	// nothing but would fail its precondition.
	writeMu sync.Mutex

	// mu guards the fields below. Lock order: peers.mu before mu.
	mu        sync.Mutex
	desired   handoff.Record
	written   handoff.Record
	current   *coordinationv1.Lease // own Lease as last written or read; nil until acquired
	lastRenew time.Time
	renewed   bool // lastRenew is set
	acquired  bool
	left      bool   // Delete was called: never write the own Lease again
	scanClean bool   // the join scan found the ring clean (scan.go)
	scanDone  bool   // the join scan has returned
	takeOver  string // TakeOver: a version of another writer that may be overwritten
	// cacheStatus is what SetCacheStatus last published (nil: nothing).
	cacheStatus *CacheStatus
	fatal       error
	cancelRun   context.CancelCauseFunc
	// acquireErr is why the own Lease is not held: the last failure to
	// read or create it, until a read or write succeeds.
	acquireErr error
}

// New validates opts, applies defaults and returns a Member that has not
// touched the API server yet.
func New(opts Options) (*Member, error) {
	opts.applyDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	met, err := newMetrics(opts.Registerer, opts.Ring)
	if err != nil {
		return nil, err
	}
	name := lease.LeaseName(opts.Ring, opts.Identity)
	m := &Member{
		opts:       opts,
		name:       name,
		leases:     opts.Client.CoordinationV1().Leases(opts.Namespace),
		clock:      opts.Clock,
		log:        opts.Logger.WithValues("ring", opts.Ring, "lease", opts.Namespace+"/"+name),
		metrics:    met,
		changes:    make(chan struct{}, 1),
		wake:       make(chan struct{}, 1),
		takeOverCh: make(chan struct{}, 1),
		desired: handoff.Record{
			Identity: opts.Identity, Incarnation: opts.Incarnation, Fingerprint: opts.Params,
			State: handoff.StateJoining, Claim: shard.NewPartitionSet(opts.Partitions),
		},
	}
	m.peers = newPeers(m)
	return m, nil
}

// Incarnation returns the random id this process writes into its Lease.
func (m *Member) Incarnation() string { return m.opts.Incarnation }

// Name returns the own Lease's name, <ring>-<identity>.
func (m *Member) Name() string { return m.name }

// SetDesired sets what the next write of the own Lease publishes, and makes
// that write prompt when r differs from the last written record. An empty
// State means joining and a zero-size Claim means none; a record with an
// unknown State is refused (logged, the previous record stays). Identity,
// Incarnation and Fingerprint are always this Member's (Options.Identity,
// Incarnation and Params).
func (m *Member) SetDesired(r handoff.Record) {
	switch r.State {
	case "":
		r.State = handoff.StateJoining
	case handoff.StateJoining, handoff.StateActive, handoff.StateLeaving:
	default:
		m.log.Error(nil, "SetDesired: ignoring a record with an unknown state; use StateJoining, StateActive or StateLeaving", "state", r.State)
		return
	}
	switch r.Claim.Size() {
	case m.opts.Partitions:
		r.Claim = r.Claim.Clone()
	case 0: // the zero PartitionSet: an empty claim
		r.Claim = shard.NewPartitionSet(m.opts.Partitions)
	default:
		// Resizing would publish a claim other than the one the caller
		// decided on (partitions dropped or never released): refuse it.
		m.log.Error(nil, "SetDesired: ignoring a record whose claim is over another partition count than the ring's; build it with the ring's partition count", "claimPartitions", r.Claim.Size(), "partitions", m.opts.Partitions)
		return
	}
	r.Identity, r.Incarnation, r.Fingerprint = m.opts.Identity, m.opts.Incarnation, m.opts.Params
	m.mu.Lock()
	m.desired = r
	prompt := m.acquired && !r.Equal(m.written)
	m.mu.Unlock()
	if prompt {
		select {
		case m.wake <- struct{}{}:
		default:
		}
	}
}

// SetCacheStatus sets what the own Lease publishes of this replica's cache
// (AnnotationCacheMode, AnnotationCachedObjects). It is written with the
// next renewal and never causes a write of its own, so it costs the API
// server nothing: call it as often as the counts are worth refreshing. A
// status that cannot be published (an empty mode, or one that is not a
// short lower-case word, or a negative count) is refused and logged. It
// takes the mode and the count, not a CacheStatus, so that a runtime outside
// this module (the controller-runtime adapter) can hand it on as a func.
func (m *Member) SetCacheStatus(mode string, objects int) {
	s := CacheStatus{Mode: mode, Objects: objects}
	if !s.valid() {
		m.log.Error(nil, "SetCacheStatus: ignoring a status that cannot be published; give a lower-case mode of at most 16 letters and a count of at least 0", "mode", s.Mode, "objects", s.Objects)
		return
	}
	m.mu.Lock()
	m.cacheStatus = &s
	m.mu.Unlock()
}

// TakeOver allows Run to overwrite the own Lease at version, written by
// another process: an earlier incarnation whose Lease the caller confirmed
// expired, or someone who damaged it. Run overwrites no other writer's
// version on its own.
func (m *Member) TakeOver(version string) {
	m.mu.Lock()
	changed := m.takeOver != version
	m.takeOver = version
	m.mu.Unlock()
	if changed {
		select {
		case m.takeOverCh <- struct{}{}:
		default:
		}
	}
}

// takeOverVersion returns the version TakeOver last allowed ("" for none).
func (m *Member) takeOverVersion() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.takeOver
}

// Listed reports whether the watch of the ring has listed once: Snapshot
// holds the ring's Leases from then on.
func (m *Member) Listed() bool { return m.peers.hasSynced() }

// Departed returns the Leases that left the view recently (deleted, or
// relabelled out of the ring) in their last state, as the watch event that
// removed them carried it, with Gone set: the handoff core keeps their
// claims in force although it may never have seen them in the view. There
// is one per Lease object (name and UID), sorted by name and, within a
// name, in the order they left, the last one last: a name deleted twice
// while the watch lagged reports both objects, and a departure stays
// reported after its name is created again (but not once the same object
// is back in the ring). A relist that misses a departure cannot report it.
func (m *Member) Departed() []Observed { return m.peers.departedSnapshot(m.clock.Now()) }

// Snapshot returns every Lease of the ring the watch currently holds, the
// own one included, sorted by identity (then name).
func (m *Member) Snapshot() []Observed { return m.peers.snapshot() }

// Changes returns a channel that receives (coalesced, capacity 1) whenever
// the snapshot, the renew status or Synced may have changed.
func (m *Member) Changes() <-chan struct{} { return m.changes }

func (m *Member) notify() {
	select {
	case m.changes <- struct{}{}:
	default:
	}
}

// LastRenew returns when the last successful write of the own Lease was sent:
// a write whose response arrived within RenewTimeout. ok is false before the
// first one.
func (m *Member) LastRenew() (sentAt time.Time, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastRenew, m.renewed
}

// lastWritten returns the last record successfully written to the own Lease
// and the resourceVersion that write produced ("" before the first).
func (m *Member) lastWritten() (handoff.Record, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.current == nil {
		return m.written.Clone(), ""
	}
	return m.written.Clone(), m.current.ResourceVersion
}

// AcquireError returns why Run does not hold the own Lease yet, when a
// request failed: the last error of reading or creating it (a
// *NamespaceNotFoundError when its namespace does not exist), or nil once a
// read or write of it succeeds. Run keeps retrying meanwhile.
func (m *Member) AcquireError() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.acquireErr
}

// setAcquireError records err as AcquireError and tells Changes when it
// differs from the previous one.
func (m *Member) setAcquireError(err error) {
	m.mu.Lock()
	changed := (err == nil) != (m.acquireErr == nil) || err != nil && err.Error() != m.acquireErr.Error()
	m.acquireErr = err
	m.mu.Unlock()
	if changed {
		m.notify()
	}
}

// Synced reports whether the watch of the ring has listed once and the own
// Lease is held (false again after Delete).
func (m *Member) Synced() bool {
	synced := m.peers.hasSynced()
	m.mu.Lock()
	defer m.mu.Unlock()
	return synced && m.acquired && !m.left
}

// ReadPeer reads the Lease of ref.Identity directly from the API server (a
// quorum read of its latest state, not the watch cache), for the core to
// judge whether a Lease that looked expired at ref.Version lets its claims
// go (handoff.JudgeConfirm). A Lease relabelled out of the ring reads as
// not found: the ring can no longer see it, which the core treats as
// absence, not as death.
func (m *Member) ReadPeer(ctx context.Context, ref handoff.LeaseRef) (handoff.LeaseRead, error) {
	name := lease.LeaseName(m.opts.Ring, ref.Identity)
	// An empty resourceVersion in GetOptions asks for the most recent state,
	// read from etcd with quorum.
	l, err := m.leases.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return handoff.LeaseRead{}, nil
	case apierrors.IsForbidden(err):
		return handoff.LeaseRead{}, newForbiddenError(err, "get", m.opts.Namespace, name)
	case err != nil:
		return handoff.LeaseRead{}, fmt.Errorf("lease: reading Lease %s/%s: %w", m.opts.Namespace, name, err)
	}
	if l.Labels[lease.LabelRing] != m.opts.Ring {
		return handoff.LeaseRead{}, nil
	}
	return handoff.LeaseRead{Found: true, UID: string(l.UID), Version: l.ResourceVersion}, nil
}

// Delete deletes the own Lease, conditioned on its UID and the
// resourceVersion of the last write, so that peers see the replica gone at
// once (a graceful leave). From the moment Delete is called the Member no
// longer writes its Lease, even if Delete fails (the Lease then expires).
// Deleting a Lease that is already gone, or was never acquired, succeeds.
func (m *Member) Delete(ctx context.Context) error {
	m.mu.Lock()
	m.left = true
	m.mu.Unlock()
	m.notify()

	m.writeMu.Lock()
	defer m.writeMu.Unlock()
	for range 3 {
		m.mu.Lock()
		cur := m.current
		m.mu.Unlock()
		if cur == nil {
			return nil
		}
		version, verb, err := m.deleteOwn(ctx, cur)
		switch {
		case err == nil || apierrors.IsNotFound(err):
			m.released()
			m.log.Info("deleted own Lease", "version", version)
			return nil
		case apierrors.IsForbidden(err):
			return newForbiddenError(err, verb, m.opts.Namespace, m.name)
		case !apierrors.IsConflict(err):
			return fmt.Errorf("lease: deleting own Lease %s/%s: %w", m.opts.Namespace, m.name, err)
		}
		// Conflict: the Lease changed since our last write. Our own renew
		// that timed out may have landed after all; anything else writing
		// it is a duplicate.
		l, err := m.leases.Get(ctx, m.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			m.released()
			return nil
		case err != nil:
			return fmt.Errorf("lease: deleting own Lease %s/%s: re-reading it after a conflict: %w", m.opts.Namespace, m.name, err)
		}
		if inc := l.Annotations[AnnotationIncarnation]; inc != m.opts.Incarnation {
			m.released()
			return fmt.Errorf("lease: not deleting own Lease %s/%s: another process (incarnation %q) wrote it since; it is not this process's (%q) to delete",
				m.opts.Namespace, m.name, inc, m.opts.Incarnation)
		}
		m.mu.Lock()
		m.current = l
		m.mu.Unlock()
	}
	return fmt.Errorf("lease: deleting own Lease %s/%s: it kept changing (three conflicts); something else is writing it", m.opts.Namespace, m.name)
}

// deleteOwn deletes the own Lease cur, conditioned on its UID and version.
// The member finalizer goes first, in an update conditioned on that version
// (which carries the empty claim of the leave), so that the delete completes
// at once. It returns the version the failing or last request was
// conditioned on, and that request's verb.
func (m *Member) deleteOwn(ctx context.Context, cur *coordinationv1.Lease) (version, verb string, err error) {
	if slices.Contains(cur.Finalizers, FinalizerMember) {
		out, err := m.leases.Update(ctx, withoutFinalizer(cur), metav1.UpdateOptions{})
		if err != nil {
			return cur.ResourceVersion, "update", err
		}
		m.mu.Lock()
		m.current = out
		m.mu.Unlock()
		cur = out
	}
	uid, version := cur.UID, cur.ResourceVersion
	return version, "delete", m.leases.Delete(ctx, m.name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &version},
	})
}

// released records that the own Lease is no longer ours.
func (m *Member) released() {
	m.mu.Lock()
	m.acquired, m.current = false, nil
	m.mu.Unlock()
	m.notify()
}

// DeletePeer deletes the Lease of a peer that has been expired for long,
// conditioned on version: if the Lease changed since (the peer came back),
// nothing is deleted and DeletePeer returns nil after logging it. A Lease
// already gone is not an error either.
func (m *Member) DeletePeer(ctx context.Context, identity, version string) error {
	if identity == m.opts.Identity {
		return errors.New("lease: DeletePeer was asked to delete this replica's own Lease; use Delete")
	}
	if version == "" {
		return errors.New("lease: DeletePeer needs the resourceVersion the expiry judgement rests on")
	}
	name := lease.LeaseName(m.opts.Ring, identity)
	version, done, err := m.releasePeer(ctx, name, version)
	if done || err != nil {
		return err
	}
	err = m.leases.Delete(ctx, name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{ResourceVersion: &version},
	})
	switch {
	case err == nil:
		m.log.Info("deleted the Lease of a long-expired peer", "peer", identity, "version", version)
		return nil
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		m.log.Info("not deleting a peer's Lease: it changed since it was judged expired", "peer", identity, "version", version)
		return nil
	case apierrors.IsForbidden(err):
		return newForbiddenError(err, "delete", m.opts.Namespace, name)
	default:
		return fmt.Errorf("lease: deleting peer Lease %s/%s: %w", m.opts.Namespace, name, err)
	}
}

// releasePeer prepares the deletion of a long-expired peer's Lease that
// carries the member finalizer: one update, conditioned on version, removes
// the finalizer and publishes an empty claim in state leaving (Released),
// so that peers who see that version release its claims at once instead of
// keeping a tombstone when it leaves, and none takes it for a member. It
// returns the version to delete, or done when nothing is left to do (the
// Lease changed, is gone, or the update deleted it).
func (m *Member) releasePeer(ctx context.Context, name, version string) (next string, done bool, err error) {
	l, err := m.leases.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", true, nil
	case apierrors.IsForbidden(err):
		return "", true, newForbiddenError(err, "get", m.opts.Namespace, name)
	case err != nil:
		return "", true, fmt.Errorf("lease: reading peer Lease %s/%s before deleting it: %w", m.opts.Namespace, name, err)
	case l.ResourceVersion != version:
		m.log.Info("not deleting a peer's Lease: it changed since it was judged expired", "peer", name, "version", version)
		return "", true, nil
	case !slices.Contains(l.Finalizers, FinalizerMember):
		return version, false, nil
	}
	u := Released(l, m.opts.Partitions)
	out, err := m.leases.Update(ctx, u, metav1.UpdateOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", true, nil
	case apierrors.IsConflict(err):
		m.log.Info("not deleting a peer's Lease: it changed since it was judged expired", "peer", name, "version", version)
		return "", true, nil
	case apierrors.IsForbidden(err):
		return "", true, newForbiddenError(err, "update", m.opts.Namespace, name)
	case err != nil:
		return "", true, fmt.Errorf("lease: removing the finalizer of peer Lease %s/%s: %w", m.opts.Namespace, name, err)
	case out.DeletionTimestamp != nil:
		return "", true, nil // it was being deleted: the update completed it
	}
	return out.ResourceVersion, false, nil
}

// Finalize removes the member finalizer from the own Lease if it still has
// version (handoff.Ready.Finalize: someone is deleting it and nothing of
// this process runs any more). The deletion then completes, and the next
// renew creates the Lease afresh.
func (m *Member) Finalize(ctx context.Context, version string) error {
	m.writeMu.Lock()
	defer m.writeMu.Unlock()
	l, err := m.getOwn(ctx)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsForbidden(err):
		return newForbiddenError(err, "get", m.opts.Namespace, m.name)
	case err != nil:
		return fmt.Errorf("lease: reading own Lease %s/%s to remove its finalizer: %w", m.opts.Namespace, m.name, err)
	case l.ResourceVersion != version:
		return fmt.Errorf("lease: own Lease %s/%s changed (version %s, expected %s) before its finalizer could be removed", m.opts.Namespace, m.name, l.ResourceVersion, version)
	case !slices.Contains(l.Finalizers, FinalizerMember):
		return nil
	}
	out, err := m.leases.Update(ctx, withoutFinalizer(l), metav1.UpdateOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsForbidden(err):
		return newForbiddenError(err, "update", m.opts.Namespace, m.name)
	case err != nil:
		return fmt.Errorf("lease: removing the finalizer of own Lease %s/%s: %w", m.opts.Namespace, m.name, err)
	}
	m.mu.Lock()
	m.current = out
	m.mu.Unlock()
	return nil
}

func (m *Member) hasLeft() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.left
}

// fail records the first fatal error and stops Run.
func (m *Member) fail(err error) {
	m.mu.Lock()
	first := m.fatal == nil
	if first {
		m.fatal = err
	}
	cancel := m.cancelRun
	m.mu.Unlock()
	if first {
		m.log.Error(err, "membership stopped")
		if cancel != nil {
			cancel(err)
		}
		m.notify()
	}
}

// JoinScanClean reports that the join scan came out clean (scan.go): the
// handoff core may skip its join wait if every Lease it first saw carries
// the member finalizer.
func (m *Member) JoinScanClean() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.scanClean
}
