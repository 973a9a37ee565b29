package harness

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/internal/testwait"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/shard/ringstatus"
)

// Ring is the ring as its Leases show it.
type Ring struct {
	// Members maps identity to its parsed Lease.
	Members map[string]membership.Observed
	// Labels maps identity to its Lease's labels, for what kubectl shows.
	Labels map[string]map[string]string
	// Live is the set of identities running when the ring was read; the
	// other Leases are left by killed replicas until they are collected.
	Live map[string]bool
	// Status is the same Leases read by package ringstatus, as the CLI
	// shows them.
	Status ringstatus.Ring
}

func (r Ring) String() string {
	ids := make([]string, 0, len(r.Members))
	for id := range r.Members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		m := r.Members[id]
		parts[i] = fmt.Sprintf("%s=%s/%d", id, m.State, m.Claim.Len())
		if !r.Live[id] {
			parts[i] += "(not running)"
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// ReadRing lists the ring's Leases.
func (h *Harness) ReadRing(ctx context.Context) (Ring, error) {
	list, err := h.client.CoordinationV1().Leases(h.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: lease.LabelRing + "=" + h.opts.Ring})
	if err != nil {
		return Ring{}, err
	}
	ring := Ring{Members: map[string]membership.Observed{}, Labels: map[string]map[string]string{}, Live: map[string]bool{}}
	for _, id := range h.Live() {
		ring.Live[id] = true
	}
	for i := range list.Items {
		l := &list.Items[i]
		o := membership.Parse(l, h.opts.Ring, h.opts.Partitions)
		ring.Members[o.Identity] = o
		ring.Labels[o.Identity] = l.Labels
	}
	ring.Status = ringstatus.Empty(h.opts.Namespace, h.opts.Ring)
	if rs := ringstatus.Analyze(h.opts.Namespace, list.Items, time.Now()); len(rs) == 1 {
		ring.Status = rs[0]
	}
	return ring, nil
}

// checkConverged says why the ring has not converged on the live replicas,
// or returns nil: the Leases show it converged on exactly them (see
// ringstatus.Ring.Converged), and the records agree: each partition is
// active on exactly one live process, the one whose Lease claims it.
func (h *Harness) checkConverged(ctx context.Context) (Ring, error) {
	ring, err := h.ReadRing(ctx)
	if err != nil {
		return ring, err
	}
	live := sortedKeys(ring.Live)
	if len(live) == 0 {
		return ring, errors.New("no replica is running")
	}
	if err := ring.Status.Converged(live...); err != nil {
		return ring, fmt.Errorf("%w (ring %s)", err, ring)
	}
	owners := h.Log().Owners(time.Now().UnixNano())
	for _, id := range live {
		for _, p := range ring.Members[id].Claim.Slice() {
			if o := owners[p]; len(o) != 1 || o[0] != h.Replica(id).Process {
				return ring, fmt.Errorf("partition %d, claimed by %s, is active on %v", p, id, o)
			}
		}
	}
	return ring, nil
}

// Converged checks once whether the ring has converged on the live
// replicas, as WaitConverged waits for, and says why not.
func (h *Harness) Converged(ctx context.Context) (Ring, error) { return h.checkConverged(ctx) }

// WaitConverged waits until the ring has converged on the live replicas
// (see checkConverged) and returns it. On a timeout it logs a diagnosis of
// every live replica (Diagnose) before failing the test.
func (h *Harness) WaitConverged(timeout time.Duration) Ring {
	h.t.Helper()
	var ring Ring
	what := "ring convergence on " + strings.Join(h.Live(), ",")
	err := testwait.Poll(100*time.Millisecond, timeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		ring, err = h.checkConverged(ctx)
		return err
	})
	if err != nil {
		msg := fmt.Sprintf("%s: %v", what, err)
		h.Diagnose(msg)
		h.t.Fatal(msg)
	}
	return ring
}

// CountLeaseWrites watches the ring's Leases for d and returns how many
// writes (updates and creations) each identity's Lease received.
func (h *Harness) CountLeaseWrites(ctx context.Context, d time.Duration) (map[string]int, error) {
	sel := metav1.ListOptions{LabelSelector: lease.LabelRing + "=" + h.opts.Ring}
	list, err := h.client.CoordinationV1().Leases(h.opts.Namespace).List(ctx, sel)
	if err != nil {
		return nil, err
	}
	sel.ResourceVersion = list.ResourceVersion
	w, err := h.client.CoordinationV1().Leases(h.opts.Namespace).Watch(ctx, sel)
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	counts := map[string]int{}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return counts, nil
		case <-ctx.Done():
			return counts, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return counts, errors.New("lease watch closed early")
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if l, ok := ev.Object.(*coordinationv1.Lease); ok && l.Spec.HolderIdentity != nil {
					counts[*l.Spec.HolderIdentity]++
				}
			case watch.Error:
				return counts, fmt.Errorf("lease watch: %v", ev.Object)
			}
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
