package membership

import (
	"context"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/lease"
)

// joinScan runs once, after the ring's first list: it lists every Lease of
// the namespace, label or not, and reports the ring clean (JoinScanClean)
// when no Lease with the member finalizer has left the ring and the watch
// holds every ring Lease the list showed. A member Lease relabelled out of
// the ring by hand before this process listed it is invisible to the ring's
// watch; its finalizer gives it away here, and the replica then joins only
// after watching the ring for LeaseDuration (handoff.Core.JoinScanClean).
func (m *Member) joinScan(ctx context.Context) {
	defer func() {
		m.mu.Lock()
		m.scanDone = true
		m.mu.Unlock()
	}()
	if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return m.peers.hasSynced(), nil
	}); err != nil {
		return
	}
	var list *coordinationv1.LeaseList
	bo := newBackoff(acquireBackoffInitial, acquireBackoffMax)
	for {
		var err error
		list, err = m.leases.List(ctx, metav1.ListOptions{})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		if apierrors.IsForbidden(err) {
			m.log.Info("joining waits LeaseDuration: cannot list the namespace's Leases to check for relabelled members", "error", err.Error())
			return
		}
		m.log.V(1).Info("listing the namespace's Leases for the join scan failed; retrying", "error", err.Error())
		if !m.sleep(ctx, bo.Step()) {
			return
		}
	}
	// Which Leases count is the handoff core's rule (handoff.JudgeJoinScan).
	scanned := make([]handoff.ScannedLease, len(list.Items))
	for i := range list.Items {
		l := &list.Items[i]
		scanned[i] = handoff.ScannedLease{Name: l.Name, Ring: l.Labels[lease.LabelRing], Finalized: slices.Contains(l.Finalizers, FinalizerMember)}
	}
	scan := handoff.JudgeJoinScan(m.opts.Ring, scanned)
	if scan.Outside >= 0 {
		l := scanned[scan.Outside]
		m.log.Info("joining waits LeaseDuration: a member Lease is outside the ring (relabelled by hand?); its holder may still be at work",
			"outside", l.Name, "label", lease.LabelRing+"="+l.Ring, "finalizer", FinalizerMember)
		return
	}
	uids := make([]string, len(scan.Members))
	for i, j := range scan.Members {
		uids[i] = string(list.Items[j].UID)
	}
	// A ring Lease the list showed but the watch has not delivered yet
	// (relabelled back into the ring just now) must be in the view first.
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, m.opts.LeaseDuration, true, func(context.Context) (bool, error) {
		return m.peers.holdsAll(uids), nil
	}); err != nil {
		return
	}
	m.mu.Lock()
	m.scanClean = true
	m.mu.Unlock()
	m.notify()
}

// joinScanDone reports that joinScan has returned, clean or not.
func (m *Member) joinScanDone() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.scanDone
}
