package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kshard/kshard/e2e/harness"
	"github.com/kshard/kshard/shard"
)

// relabelTimeout bounds how long after the tampering stops every object
// must carry its own partition's label again. The cache relabels an object
// it sees within a label patch, and one that left every view after its
// confirmation read (the labelled cache's DefaultConfirmAfter); the rest is a loaded
// machine's watch and scheduling lag.
const relabelTimeout = time.Minute

// TestLabelTampering strips, edits and replaces the partition labels of the
// objects through the API server, as a third party would, while a writer
// updates every object and three replicas reconcile them on the gate-free
// sharded cache (CacheMode labels, whatever the flags say). Halfway through,
// one replica restarts, so partitions move while labels are wrong. Besides
// finish's checks (no overlap, no lost update, and no reconcile that read
// an existing object as NotFound), every object must carry its own
// partition's label again once the tampering and the writer have stopped:
// the replicas restore labels by themselves, not on the next update.
func TestLabelTampering(t *testing.T) {
	scenarioIn(t, "tamper", setupLabels, func(r *round) {
		h := r.harness(harness.Options{})
		keys := h.CreateConfigMaps(200)
		writer := h.StartWriter(keys, 40)
		ids := identities(3)
		r.startFleet(h, ids...)
		r.converge(h)
		labels := newPartitionLabels(r.t, h)
		began := time.Now()
		labels.await(r.t, h, relabelTimeout)
		r.t.Logf("every object carried its partition label %s after the ring converged", time.Since(began).Round(time.Millisecond))

		window := r.between(20*time.Second, 30*time.Second)
		began = time.Now()
		tm := startTamperer(r.t, h, labels, keys, r.rng.Uint64())
		r.pause(window/3, 2*window/3)
		victim := ids[r.rng.IntN(len(ids))]
		exit := r.stop(h, victim)
		r.faults++
		r.t.Logf("SIGTERM %s during the tampering: its partitions move to its peers", exit.Process)
		h.StartReady(victim)
		until(began.Add(window))
		counts := tm.stop()
		r.t.Logf("tampering for %s: %s", window.Round(time.Millisecond), counts)
		suite.addTampered(counts.total())
		for _, a := range tamperActions {
			if counts.done[a] == 0 {
				r.t.Errorf("the tamperer never managed to %s: the round did not exercise it (%s)", a, counts)
			}
		}

		// Stopped first, so that no update can carry an object back into
		// a view: what restores the labels must be the cache itself.
		writer.Stop()
		stopped := time.Now()
		labels.await(r.t, h, relabelTimeout)
		r.t.Logf("every object carried its partition label again %s after the tampering and the writer stopped", time.Since(stopped).Round(time.Millisecond))
		r.converge(h)
		r.finish(h, writer)
	})
}

// partitionLabels is the ring's partition label: its key and the value
// each object must carry.
type partitionLabels struct {
	key         string
	partitioner shard.Partitioner
}

func newPartitionLabels(t *testing.T, h *harness.Harness) partitionLabels {
	t.Helper()
	opts := h.Options()
	cfg := shard.Config{Partitions: opts.Partitions, Scheme: shard.Scheme(opts.PartitionBy)}
	key, err := shard.PartitionLabelKey(opts.Ring, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := shard.PartitionerFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return partitionLabels{key: key, partitioner: p}
}

// want is the label value of the object of key ("namespace/name").
func (l partitionLabels) want(key string) string {
	return shard.PartitionLabelValue(l.partitioner.Partition(key))
}

// await waits until every object of the harness carries its partition's
// label, failing the test with the ones that do not after timeout.
func (l partitionLabels) await(t *testing.T, h *harness.Harness, timeout time.Duration) {
	t.Helper()
	h.Await(timeout, "every object labelled with its partition", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cms, err := h.ConfigMaps(ctx)
		if err != nil {
			return err
		}
		var wrong []string
		for _, cm := range cms {
			key := shard.KeyOf(cm.Namespace, cm.Name)
			if got, ok := cm.Labels[l.key]; !ok || got != l.want(key) {
				wrong = append(wrong, fmt.Sprintf("%s=%q (has label: %t, want %q)", key, got, ok, l.want(key)))
			}
		}
		if len(wrong) > 0 {
			if len(wrong) > 10 {
				wrong = append(wrong[:10], fmt.Sprintf("… and %d more", len(wrong)-10))
			}
			return fmt.Errorf("%d objects without their partition's label: %s", len(wrong), strings.Join(wrong, ", "))
		}
		return nil
	})
}

// Things a third party does to an object's partition label.
const (
	// tamperStrip removes the label with a JSON patch.
	tamperStrip = "strip the label"
	// tamperOther sets it to another partition's value (merge patch): the
	// object moves into that partition's selector, on whichever replica
	// holds it.
	tamperOther = "set another partition"
	// tamperGarbage sets it to a value that names no partition.
	tamperGarbage = "set garbage"
	// tamperReplace replaces the object (PUT, conditioned on the
	// resourceVersion read) with a copy without the label, as `kubectl
	// replace` of a manifest that lacks it does. Unconditioned, a replace
	// could write back an older data[gen] than the writer's last
	// acknowledged one, which the lost-update check would count as lost.
	tamperReplace = "replace without it"
)

var tamperActions = []string{tamperStrip, tamperOther, tamperGarbage, tamperReplace}

// tamperCounts are what a tamperer did.
type tamperCounts struct {
	done map[string]int
	// twice counts the objects tampered with twice in a row, without a
	// pause: strip and then set another value, say.
	twice int
	// skipped counts strips of an object that had no label left.
	skipped  int
	failures int
	lastErr  error
}

func (c tamperCounts) total() int {
	n := 0
	for _, v := range c.done {
		n += v
	}
	return n
}

func (c tamperCounts) String() string {
	parts := make([]string, 0, len(tamperActions))
	for _, a := range tamperActions {
		parts = append(parts, fmt.Sprintf("%s %d", a, c.done[a]))
	}
	return fmt.Sprintf("%d label tamperings (%s), %d of them twice in a row, %d strips of no label, %d failed (last error: %v)",
		c.total(), strings.Join(parts, ", "), c.twice, c.skipped, c.failures, c.lastErr)
}

// tamperer changes partition labels at random until stopped.
type tamperer struct {
	client kubernetes.Interface
	labels partitionLabels
	keys   []string // "namespace/name"
	rng    *rand.Rand
	// log gets one line per change, beside the records (kept when the
	// round fails), to tell what happened to a key.
	log *os.File

	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex // guards counts
	counts tamperCounts
}

// startTamperer starts tampering with the labels of keys (from h's
// CreateConfigMaps with spread objects), with its own random source; the
// test's cleanup stops it.
func startTamperer(t *testing.T, h *harness.Harness, labels partitionLabels, keys []string, seed uint64) *tamperer {
	t.Helper()
	log, err := os.Create(filepath.Join(filepath.Dir(h.RecordDir()), "tamper.log"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tm := &tamperer{
		client: h.Client(), labels: labels, keys: keys, rng: rand.New(rand.NewPCG(seed, 1)), log: log,
		cancel: cancel, done: make(chan struct{}), counts: tamperCounts{done: map[string]int{}},
	}
	go tm.run(ctx)
	t.Cleanup(func() { tm.stop() })
	return tm
}

// stop ends the tampering, waits for it and returns what it did. Calling
// it again returns the same.
func (tm *tamperer) stop() tamperCounts {
	tm.cancel()
	<-tm.done
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.counts
}

// run tampers with a batch of one to four objects every 20–150ms; one
// object in four gets a second change at once.
func (tm *tamperer) run(ctx context.Context) {
	defer close(tm.done)
	defer tm.log.Close()
	for {
		wait := 20*time.Millisecond + time.Duration(tm.rng.Int64N(int64(130*time.Millisecond)))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		for range 1 + tm.rng.IntN(4) {
			key := tm.keys[tm.rng.IntN(len(tm.keys))]
			tm.apply(ctx, key, tamperActions[tm.rng.IntN(len(tamperActions))])
			if tm.rng.IntN(4) == 0 {
				tm.apply(ctx, key, tamperActions[tm.rng.IntN(len(tamperActions))])
				tm.mu.Lock()
				tm.counts.twice++
				tm.mu.Unlock()
			}
		}
	}
}

// apply does action to the object of key and counts the outcome.
func (tm *tamperer) apply(ctx context.Context, key, action string) {
	sent := time.Now()
	value, done, err := tm.do(ctx, key, action)
	if ctx.Err() != nil {
		return
	}
	fmt.Fprintf(tm.log, "%d %d %s: %s %q done=%t err=%v\n", sent.UnixNano(), time.Now().UnixNano(), key, action, value, done, err)
	tm.mu.Lock()
	defer tm.mu.Unlock()
	switch {
	case err != nil:
		tm.counts.failures++
		tm.counts.lastErr = fmt.Errorf("%s of %s: %w", action, key, err)
	case done:
		tm.counts.done[action]++
	default:
		tm.counts.skipped++
	}
}

// do sends action's request; value is the label value it set (none for a
// strip or a replace), and done is false when there was nothing to do (a
// strip of an object without the label).
func (tm *tamperer) do(ctx context.Context, key, action string) (value string, done bool, err error) {
	namespace, name, _ := strings.Cut(key, "/")
	cms := tm.client.CoreV1().ConfigMaps(namespace)
	switch action {
	case tamperStrip:
		// RFC 6901: "/" in the label key is escaped as "~1".
		path := "/metadata/labels/" + strings.ReplaceAll(strings.ReplaceAll(tm.labels.key, "~", "~0"), "/", "~1")
		patch, err := json.Marshal([]map[string]string{{"op": "remove", "path": path}})
		if err != nil {
			return "", false, err
		}
		_, err = cms.Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{})
		if apierrors.IsInvalid(err) {
			return "", false, nil // no label to remove
		}
		return "", err == nil, err
	case tamperOther, tamperGarbage:
		value := tm.otherPartition(key)
		if action == tamperGarbage {
			value = tm.garbage()
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{tm.labels.key: value}}})
		if err != nil {
			return value, false, err
		}
		_, err = cms.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return value, err == nil, err
	case tamperReplace:
		for attempt := 0; ; attempt++ {
			cm, err := cms.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return "", false, err
			}
			delete(cm.Labels, tm.labels.key)
			cm.ManagedFields = nil // a manifest carries none
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
			if apierrors.IsConflict(err) && attempt < 5 {
				continue // the writer or a labeller wrote it meanwhile
			}
			return "", err == nil, err
		}
	}
	return "", false, fmt.Errorf("unknown tampering %q", action)
}

// otherPartition is a valid label value naming a partition other than
// key's own.
func (tm *tamperer) otherPartition(key string) string {
	n := tm.labels.partitioner.Count()
	own := tm.labels.partitioner.Partition(key)
	return shard.PartitionLabelValue((own + 1 + tm.rng.IntN(n-1)) % n)
}

// garbage is a label value that names no partition: not a decimal, not
// canonical, out of range, or empty.
func (tm *tamperer) garbage() string {
	n := tm.labels.partitioner.Count()
	values := []string{"garbage", "007", strconv.Itoa(n), strconv.Itoa(n + 1000), ""}
	return values[tm.rng.IntN(len(values))]
}
