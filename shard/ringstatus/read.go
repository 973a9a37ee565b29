package ringstatus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/shard"
)

// Read lists the Leases of ring in namespace and reads them as of now. A
// ring without Leases reads as empty, with the default partition count.
func Read(ctx context.Context, client kubernetes.Interface, namespace, ring string) (Ring, error) {
	list, err := client.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{LabelSelector: lease.LabelRing + "=" + ring})
	if err != nil {
		return Ring{}, fmt.Errorf("listing the Leases of ring %q in namespace %q: %w", ring, namespace, err)
	}
	for _, r := range Analyze(namespace, list.Items, time.Now()) {
		if r.Name == ring {
			return r, nil
		}
	}
	return Empty(namespace, ring), nil
}

// Empty is a ring without Leases.
func Empty(namespace, ring string) Ring {
	return Ring{Name: ring, Namespace: namespace, Partitions: shard.DefaultPartitions,
		Members: []Member{}, RingMembers: []string{}, UnclaimedPartitions: []int{},
		OverlappingPartitions: []int{}, Problems: []string{}}
}

// Converged says why the ring has not converged on exactly the members
// want, or returns nil once it has: each of them has a live, well-formed,
// active Lease with the ring's params whose partitions label matches its
// claim; they are the ring's members; each claims exactly what the ring
// assigns it; the live Leases claim every partition exactly once; and no
// live Lease of another ring configuration claims anything. (A
// replica activates what it claims only after the Leases show this, so the
// Leases alone cannot say it has; callers that can see activation check it
// too.)
func (r *Ring) Converged(want ...string) error {
	want = slices.Sorted(slices.Values(want))
	if len(want) == 0 {
		return errors.New("no member is wanted: a ring converges on at least one")
	}
	byID := map[string]Member{}
	for _, m := range r.Members {
		if m.Live() {
			byID[m.Identity] = m
		}
	}
	for _, id := range want {
		m, ok := byID[id]
		switch {
		case !ok:
			return fmt.Errorf("%s has no live Lease", id)
		case m.Problem != "":
			return fmt.Errorf("%s's Lease %s is malformed: %s", id, m.Lease, m.Problem)
		case m.Terminating:
			return fmt.Errorf("%s's Lease %s is being deleted", id, m.Lease)
		case m.State != string(handoff.StateActive):
			return fmt.Errorf("%s is %s, not active", id, m.State)
		case m.Params != r.Params:
			return fmt.Errorf("%s runs ring params %q, the ring %q", id, m.Params, r.Params)
		case m.PartitionsLabel != strconv.Itoa(m.Partitions):
			return fmt.Errorf("%s's %s label is %q but it claims %d", id, membership.LabelPartitions, m.PartitionsLabel, m.Partitions)
		}
	}
	if !slices.Equal(r.RingMembers, want) {
		return fmt.Errorf("ring members are %v, want %v", r.RingMembers, want)
	}
	if r.cfgErr != nil || r.ringErr != nil {
		return fmt.Errorf("the assignment cannot be computed: %s", r.Problems[len(r.Problems)-1])
	}
	if r.Overlapping > 0 {
		return fmt.Errorf("partition %d is claimed by more than one live Lease (%d such partitions)", r.OverlappingPartitions[0], r.Overlapping)
	}
	if r.Unclaimed > 0 {
		return fmt.Errorf("partition %d is claimed by no live Lease (%d such partitions)", r.UnclaimedPartitions[0], r.Unclaimed)
	}
	for _, m := range r.Members {
		switch {
		case !m.Live():
		case m.Params != r.Params && m.Params != "":
			// A replica of another configuration stays out of the ring;
			// it is harmless while it claims nothing.
			if !m.claimEmpty {
				return fmt.Errorf("live Lease %s runs ring params %q, not the ring's %q, and claims partitions: the replicas activate nothing it may claim", m.Lease, m.Params, r.Params)
			}
		case m.claimUnknown || !m.claim.Equal(r.assigned(m.Identity)):
			return fmt.Errorf("%s claims %d partitions, the ring assigns it %d", m.Identity, m.Partitions, r.assigned(m.Identity).Len())
		}
	}
	return nil
}
