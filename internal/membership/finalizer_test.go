package membership

import (
	"context"
	"slices"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kshard/kshard/internal/testwait"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/shard"
)

// A member Lease carries the finalizer; a deletion by hand leaves it
// terminating (and in the ring's view) until Finalize, after which the
// Member creates it afresh; a graceful leave deletes it for good.
func TestIntegrationFinalizerKeepsAHandDeletedLeaseVisible(t *testing.T) {
	e := newRealEnv(t)
	ctx := context.Background()
	leases := e.admin.CoordinationV1().Leases(e.ns)
	m, _ := e.member(e.cp.Config(), "a")
	a := run(t, m)
	testwait.True(t, waitTimeout, "a Synced", a.Synced)
	get := func() *coordinationv1.Lease {
		l, err := leases.Get(ctx, "demo-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	first := get()
	if !slices.Contains(first.Finalizers, FinalizerMember) {
		t.Fatalf("own Lease finalizers %v; want %s", first.Finalizers, FinalizerMember)
	}
	testwait.True(t, waitTimeout, "the join scan of a ring of finalized Leases to come out clean", a.JoinScanClean)

	if err := leases.Delete(ctx, "demo-a", metav1.DeleteOptions{}); err != nil { // kubectl delete lease
		t.Fatal(err)
	}
	var terminating Observed
	testwait.True(t, waitTimeout, "the own Lease to show terminating in the view", func() bool {
		o, ok := observedByName(a.Snapshot(), "demo-a")
		terminating = o
		return ok && o.Terminating && o.Finalized
	})
	if err := a.Finalize(ctx, "1"); err == nil {
		t.Fatal("Finalize of a version the Lease does not have succeeded")
	}
	if l := get(); l.DeletionTimestamp == nil || l.UID != first.UID {
		t.Fatalf("after a refused Finalize the Lease is %v (uid %s); want the terminating original", l.DeletionTimestamp, l.UID)
	}
	// Renews may land on the terminating Lease meanwhile: Finalize names
	// the version as read now.
	cur := get()
	if err := a.Finalize(ctx, cur.ResourceVersion); err != nil {
		t.Fatalf("Finalize at %s (view had %s): %v", cur.ResourceVersion, terminating.Version, err)
	}
	testwait.True(t, waitTimeout, "the Lease to be created afresh, finalized", func() bool {
		l, err := leases.Get(ctx, "demo-a", metav1.GetOptions{})
		return err == nil && l.UID != first.UID && l.DeletionTimestamp == nil && slices.Contains(l.Finalizers, FinalizerMember)
	})

	if err := a.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Get(ctx, "demo-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after a graceful leave Get = %v; want NotFound (no finalizer left behind)", err)
	}
}

// DeletePeer of a finalized Lease removes the finalizer and the claim in
// one conditional update, then deletes it.
func TestIntegrationDeletePeerOfAFinalizedLease(t *testing.T) {
	e := newRealEnv(t)
	ctx := context.Background()
	leases := e.admin.CoordinationV1().Leases(e.ns)
	peer, err := leases.Create(ctx, peerLease(e.ns, "demo", "b", "inc-b", func(l *coordinationv1.Lease) {
		l.Finalizers = []string{FinalizerMember}
		l.Annotations[AnnotationClaim] = EncodeClaim(shard.NewPartitionSet(7, 0, 1, 2))
		l.Labels[LabelPartitions] = "3"
	}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := e.member(e.cp.Config(), "a")
	a := run(t, m)
	testwait.True(t, waitTimeout, "a Synced", a.Synced)
	if err := a.DeletePeer(ctx, "b", "1"); err != nil {
		t.Fatalf("DeletePeer at a stale version: %v", err)
	}
	if l, err := leases.Get(ctx, "demo-b", metav1.GetOptions{}); err != nil || l.ResourceVersion != peer.ResourceVersion {
		t.Fatalf("a stale DeletePeer touched the Lease: %v", err)
	}
	if err := a.DeletePeer(ctx, "b", peer.ResourceVersion); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Get(ctx, "demo-b", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after DeletePeer Get = %v; want NotFound", err)
	}
}

// The join scan finds a member Lease relabelled out of the ring, and lets a
// member of another ring in the namespace be.
func TestIntegrationJoinScan(t *testing.T) {
	e := newRealEnv(t)
	ctx := context.Background()
	leases := e.admin.CoordinationV1().Leases(e.ns)
	other := peerLease(e.ns, "other", "x", "inc-x", func(l *coordinationv1.Lease) { l.Finalizers = []string{FinalizerMember} })
	if _, err := leases.Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m, _ := e.member(e.cp.Config(), "a")
	a := run(t, m)
	testwait.True(t, waitTimeout, "a's join scan", a.joinScanDone)
	if !a.JoinScanClean() {
		t.Fatal("a member Lease of another ring made the join scan unclean")
	}

	relabelled := peerLease(e.ns, "demo", "b", "inc-b", func(l *coordinationv1.Lease) {
		l.Finalizers = []string{FinalizerMember}
		delete(l.Labels, lease.LabelRing) // kubectl label lease demo-b kshard.io/ring-
	})
	if _, err := leases.Create(ctx, relabelled, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m2, logs := e.member(e.cp.Config(), "c")
	c := run(t, m2)
	testwait.True(t, waitTimeout, "c's join scan", c.joinScanDone)
	if c.JoinScanClean() {
		t.Fatal("the join scan came out clean beside a member Lease relabelled out of the ring")
	}
	if logs.count("demo-b") == 0 {
		t.Error("the log does not name the relabelled Lease that makes the replica wait")
	}
}
