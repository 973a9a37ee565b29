package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kshard/kshard/e2e/harness"
	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/internal/process"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
)

// TestShardedCacheHandOffWithoutOverlap is the membership scenario on the
// sharded cache: the API server with the ShardedListAndWatch gate, replicas
// with --partition-by=namespace, 120 ConfigMaps over 24 namespaces under a
// writer; start 3, scale to 4, SIGTERM one, kill -9 one and restart it. Every
// replica caches its namespaces only (kshard_cache_mode sharded), each move
// lists the moved partitions' objects only, and the records show no key
// reconciled by two replicas at once and every final update reconciled.
func TestShardedCacheHandOffWithoutOverlap(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: runs a control plane and four replicas for about a minute")
	}
	cp := controlplane.ForTest(t, controlplane.Options{ShardedListAndWatch: true})
	h := harness.New(t, cp, harness.Options{Ring: "sharded", PartitionBy: "namespace"})
	const objects = 120
	writer := h.StartWriter(h.CreateConfigMaps(objects), 40)
	converged := func(what string) {
		t.Helper()
		t.Logf("%s: ring converged: %s", what, h.WaitConverged(convergeTimeout))
	}
	// listed returns kshard_cache_listed_objects_total of each live
	// replica once every one has activated its whole target (the Leases
	// converge on claims; activation waits for the cache) and caches
	// ConfigMaps in the sharded mode.
	listed := func() map[string]int {
		t.Helper()
		out := map[string]int{}
		h.Await(convergeTimeout, "every target partition active", func() error {
			for _, id := range h.Live() {
				body := scrapeMetrics(t, h, id)
				if !strings.Contains(body, `kshard_cache_mode{group="",kind="/v1, Kind=ConfigMap",kind_name="ConfigMap",mode="sharded",version="v1"} 1`) {
					return fmt.Errorf("%s does not cache ConfigMaps sharded: %s", id, grepLines(body, "kshard_cache"))
				}
				active := metricValue(t, body, `kshard_partitions{state="active"}`)
				if target := metricValue(t, body, `kshard_partitions{state="target"}`); active != target {
					return fmt.Errorf("%s: %d of %d target partitions active", id, active, target)
				}
				out[id] = metricValue(t, body, `kshard_cache_listed_objects_total{group="",kind="/v1, Kind=ConfigMap",kind_name="ConfigMap",version="v1"}`)
			}
			return nil
		})
		return out
	}
	sum := func(m map[string]int) (n int) {
		for _, v := range m {
			n += v
		}
		return n
	}

	// One after another: each replica starts once the ring before it has
	// activated everything, so r-0 alone lists everything and each later
	// join lists what it gains. (Started together, a replica whose target
	// shrinks while its first LIST runs restarts that segment for the rest,
	// so the sum has no such bound: a CI run listed 366 of 120 objects.)
	var formed map[string]int
	for i := 0; i < 3; i++ {
		h.StartReady(harness.Identity(i))
		converged(fmt.Sprintf("start %d", i+1))
		formed = listed()
	}
	t.Logf("SUMMARY sharded cache: forming 3 replicas one after another listed %d objects (%d in all): %v", sum(formed), objects, formed)
	if n := formed[harness.Identity(0)]; n < objects {
		t.Errorf("%s, alone at first, listed %d objects; want all %d", harness.Identity(0), n, objects)
	}
	for _, id := range []string{harness.Identity(1), harness.Identity(2)} {
		if n := formed[id]; n == 0 || n >= objects {
			t.Errorf("%s listed %d objects when it joined; want what it gained, more than 0 and fewer than %d", id, n, objects)
		}
	}

	h.StartReady(harness.Identity(3))
	converged("scale to 4")
	after := listed()
	t.Logf("SUMMARY sharded cache: scale 3→4: the new replica listed %d objects (a quarter of %d is %d)", after[harness.Identity(3)], objects, objects/4)
	if n := after[harness.Identity(3)]; n == 0 || n >= objects {
		t.Errorf("the new replica listed %d objects; want its share, more than 0 and fewer than %d", n, objects)
	}
	for id, n := range formed {
		if after[id] != n {
			t.Errorf("%s listed %d objects while it only lost partitions; want none", id, after[id]-n)
		}
	}
	// Make before break: each replica publishes the partitions its cache
	// holds, which once settled is everything it claims.
	h.Await(convergeTimeout, "every Lease's warm set equal to its claim", func() error {
		for _, id := range h.Live() {
			l, err := h.Client().CoordinationV1().Leases(h.Options().Namespace).Get(context.Background(), h.LeaseName(id), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if warm, claim := l.Annotations[membership.AnnotationWarm], l.Annotations[membership.AnnotationClaim]; warm != claim {
				return fmt.Errorf("%s: %s=%q, claim %q", id, membership.AnnotationWarm, warm, claim)
			}
		}
		return nil
	})

	exit := h.Stop(harness.Identity(3))
	gap, held := awaitTakeover(t, h, exit, convergeTimeout)
	t.Logf("SIGTERM %s: its %d partitions active elsewhere %s after the signal", exit.Process, held, gap)
	converged("scale down to 3")

	exit = h.Kill(harness.Identity(0))
	opts := h.Options()
	failover, held := awaitTakeover(t, h, exit, opts.LeaseDuration+convergeTimeout)
	t.Logf("SUMMARY sharded cache: crash failover (SIGKILL → all %d partitions active elsewhere): %s (LeaseDuration %s)", held, failover.Round(time.Millisecond), opts.LeaseDuration)
	if limit := opts.LeaseDuration + time.Second; failover > limit {
		t.Errorf("crash failover took %s, want ≤ LeaseDuration + 1s = %s", failover, limit)
	}
	converged("kill -9 r-0")
	h.StartReady(harness.Identity(0))
	converged("restart r-0")

	stopWriterAndAwaitReconciled(t, h, writer)
	h.StopAll()
	checkRecords(t, h)
}

// scrapeMetrics returns the /metrics text of the live replica id.
func scrapeMetrics(t *testing.T, h *harness.Harness, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addr, err := h.Replica(id).ServingAddr(ctx, process.ServerMetrics)
	if err != nil {
		t.Fatalf("%s: metrics address: %v", id, err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: scraping /metrics: %v", id, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: reading /metrics: %v", id, err)
	}
	return string(b)
}

// metricValue returns the value of the sample line starting with series.
func metricValue(t *testing.T, body, series string) int {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("metric %s: %v", series, err)
			}
			return int(v)
		}
	}
	t.Fatalf("no sample %s in /metrics", series)
	return 0
}

// grepLines returns body's lines that contain s.
func grepLines(body, s string) string {
	var out []string
	for _, line := range strings.Split(body, "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
