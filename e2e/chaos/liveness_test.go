package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kshard/kshard/e2e/harness"
	"github.com/kshard/kshard/manager/kshardtest"
	"github.com/kshard/kshard/shard"
)

// livenessBound is how long after its acknowledgement every update must
// have been reconciled at its generation (or a later one) in a round of h,
// faults aside (each fault a scenario records extends the bound of the
// updates it overlaps by its length; see harness.RecordFault):
//
//   - LeaseDuration: a SIGKILLed owner's Lease, which its peers wait out;
//   - the drain: DrainGrace, or the whole reconcile (Work) when reconciles
//     ignore cancellation and the drain waits for them;
//   - the backlog: every object reconciled once by one replica's workers
//     (objects × Work / Workers), which a replica that takes most
//     partitions at once, or a writer faster than the reconciles, makes
//     an update wait behind;
//   - kshardtest.LivenessAllowance: the new owner's Lease writes, watch
//     round trips, LISTs and label patches, and the activation's replay,
//     on a loaded 2-core machine under -race.
//
// With the defaults (LeaseDuration 4s, DrainGrace 2s, Work 20ms, 4
// workers) that is 26.5-28.5s for 100-500 objects; docs/testing.md
// ("Liveness and caches") has the waits measured.
func livenessBound(h *harness.Harness) time.Duration {
	o := h.Options()
	drain := o.DrainGrace
	if o.IgnoreCancel {
		drain = max(drain, o.Work)
	}
	backlog := time.Duration(h.ObjectCount()) * o.Work / time.Duration(o.Workers)
	return o.LeaseDuration + drain + backlog + kshardtest.LivenessAllowance
}

// cacheTimeout bounds how long after the round's last update the replicas'
// caches may take to agree with the API server: watch events in flight,
// and label patches echoing back.
const cacheTimeout = 30 * time.Second

// checkCaches checks, with the writer stopped and every update reconciled,
// that every ConfigMap the replicas watch is in exactly one live replica's
// cache when they cache by partition (in every live replica's with full
// caches), at the API server's resourceVersion, and, on the gate-free
// sharded cache, carries its own partition's label. It waits up to
// cacheTimeout for them to agree and returns how many objects are misplaced
// in the caches and how many lack their label then, having failed the round
// on either.
func (r *round) checkCaches(h *harness.Harness) (misplaced, mislabelled int) {
	r.t.Helper()
	sharded := r.setup != setupFull
	var labels partitionLabels
	if r.setup == setupLabels {
		labels = newPartitionLabels(r.t, h)
	}
	var cacheProblems, labelProblems []string
	var objects int
	var readErr error
	began := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, cacheTimeout, true, func(context.Context) (bool, error) {
		objects, cacheProblems, labelProblems, readErr = r.compareCaches(h, sharded, labels)
		return readErr == nil && len(cacheProblems) == 0 && len(labelProblems) == 0, nil
	})
	if err == nil {
		r.t.Logf("caches: every one of %d ConfigMaps is in %s at its resourceVersion%s (%s after the check began)",
			objects, map[bool]string{true: "exactly one live replica's cache", false: "every live replica's cache"}[sharded],
			map[bool]string{true: " and carries its partition's label", false: ""}[r.setup == setupLabels],
			time.Since(began).Round(time.Millisecond))
		return 0, 0
	}
	if readErr != nil {
		r.t.Errorf("checking the replicas' caches: %v", readErr)
	}
	misplaced = distinctKeys(cacheProblems)
	mislabelled = len(labelProblems)
	report := func(what string, problems []string) {
		if len(problems) == 0 {
			return
		}
		shown := problems
		if len(shown) > 20 {
			shown = append(shown[:20:20], fmt.Sprintf("… and %d more", len(problems)-20))
		}
		r.t.Errorf("%s %s after the round's last update:\n  %s", what, cacheTimeout, strings.Join(shown, "\n  "))
	}
	report(fmt.Sprintf("the live replicas' caches (%v) disagree with the API server about %d of %d ConfigMaps", h.Live(), misplaced, objects), cacheProblems)
	report(fmt.Sprintf("%d of %d ConfigMaps lack their partition's label", mislabelled, objects), labelProblems)
	return misplaced, mislabelled
}

// compareCaches reads the API server's ConfigMaps and every live replica's
// cache report once and lists what disagrees.
func (r *round) compareCaches(h *harness.Harness, sharded bool, labels partitionLabels) (objects int, cacheProblems, labelProblems []string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cms, err := h.WatchedConfigMaps(ctx)
	if err != nil {
		return 0, nil, nil, err
	}
	server := make([]kshardtest.CachedObject, len(cms))
	for i, cm := range cms {
		key := shard.KeyOf(cm.Namespace, cm.Name)
		server[i] = kshardtest.CachedObject{Key: key, ResourceVersion: cm.ResourceVersion}
		if labels.key != "" {
			if got, ok := cm.Labels[labels.key]; !ok || got != labels.want(key) {
				labelProblems = append(labelProblems, fmt.Sprintf("%s: label %s=%q (present: %t), want %q", key, labels.key, got, ok, labels.want(key)))
			}
		}
	}
	caches := map[string][]kshardtest.CachedObject{}
	for _, id := range h.Live() {
		objs, err := h.CacheReport(ctx, id)
		if err != nil {
			return 0, nil, nil, fmt.Errorf("reading %s's cache: %w", id, err)
		}
		caches[id] = objs
	}
	return len(server), kshardtest.CheckCaches(server, caches, sharded), labelProblems, nil
}

// distinctKeys counts the objects CheckCaches' problem lines name (each
// line starts with the object's key and a colon).
func distinctKeys(problems []string) int {
	keys := map[string]bool{}
	for _, p := range problems {
		k, _, _ := strings.Cut(p, ": ")
		keys[k] = true
	}
	return len(keys)
}
