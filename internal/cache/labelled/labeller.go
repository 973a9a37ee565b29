package labelled

import (
	"context"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"

	"github.com/kshard/kshard/internal/cache/cachekit"
	"github.com/kshard/kshard/internal/partitionlabel"
	"github.com/kshard/kshard/shard"
)

// labeller writes partition labels: the label of an object names the
// partition of the request it maps to. An object is labelled by the replica
// where that partition is active (one at a time, so each object is written
// once), or, when its label names another partition, by a replica where
// the named one is active (the only replicas that see it).
type labeller struct {
	l       *Labelled
	queue   workqueue.TypedRateLimitingInterface[string]
	limiter flowcontrol.RateLimiter // nil: no bound

	// written remembers the resourceVersion each recent patch produced:
	// until a view shows that version, events of the object still carry
	// the old label, and must not make it be written again.
	mu      sync.Mutex
	written map[string]writtenLabel

	// foreignOnce logs the first object found with a value of the label
	// key that names no partition.
	foreignOnce sync.Once
}

// writtenLabel is a patch sent: the version it made and when.
type writtenLabel struct {
	rv uint64
	at time.Time
}

// writtenTTL bounds how long a patch is remembered: a view that has not
// shown its version by then (a watch gap) lets the object be labelled
// again.
const writtenTTL = time.Minute

// labelWorkers is how many patches are in flight at once per kind.
const labelWorkers = 4

func newLabeller(l *Labelled, qps float64) *labeller {
	lb := &labeller{
		l: l, written: map[string]writtenLabel{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "", Clock: l.opts.Clock}),
	}
	if qps > 0 {
		lb.limiter = flowcontrol.NewTokenBucketRateLimiterWithClock(float32(qps), max(1, int(qps)), l.opts.Clock)
	}
	return lb
}

// backlog is how many objects wait to be labelled here.
func (lb *labeller) backlog() int { return lb.queue.Len() }

// wants returns the label obj must carry, and whether this replica should
// write it now: the label is missing or wrong, and the partition it must
// name, or the one it names, is active here.
func (lb *labeller) wants(obj any) (key, value string, ok bool) {
	l := lb.l
	m, err := meta.Accessor(obj)
	if err != nil || m.GetDeletionTimestamp() != nil {
		return "", "", false
	}
	desired, ok := requestPartition(l.opts.Partitioner, l.opts.Route, obj)
	if !ok {
		return "", "", false
	}
	current, valid := partitionlabel.Parse(m.GetLabels()[l.opts.LabelKey], l.opts.Partitioner.Count())
	if valid && current == desired {
		return "", "", false
	}
	key = shard.KeyOf(m.GetNamespace(), m.GetName())
	if lb.pendingWrite(key, cachekit.ResourceVersion(obj)) {
		return "", "", false
	}
	l.mu.Lock()
	allowed := l.forbidden == "" && (l.active.Has(desired) || (valid && l.active.Has(current)))
	l.mu.Unlock()
	if !allowed {
		return "", "", false
	}
	return key, shard.PartitionLabelValue(desired), true
}

// pendingWrite reports whether a patch of key was sent whose version is
// newer than rv (the state an event shows): the label is on its way.
func (lb *labeller) pendingWrite(key string, rv uint64) bool {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	w, ok := lb.written[key]
	switch {
	case !ok:
		return false
	case rv >= w.rv || lb.l.opts.Clock.Since(w.at) > writtenTTL:
		delete(lb.written, key)
		return false
	}
	return true
}

// wrote remembers that a patch of key made version rv, and forgets
// patches older than writtenTTL.
func (lb *labeller) wrote(key, rv string) {
	v, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return
	}
	now := lb.l.opts.Clock.Now()
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if len(lb.written) > 1024 {
		for k, w := range lb.written {
			if now.Sub(w.at) > writtenTTL {
				delete(lb.written, k)
			}
		}
	}
	lb.written[key] = writtenLabel{rv: v, at: now}
}

// consider queues obj for labelling if it needs it here.
func (lb *labeller) consider(obj any) {
	if key, _, ok := lb.wants(obj); ok {
		lb.queue.Add(key)
	}
}

// run works the queue until ctx ends.
func (lb *labeller) run(ctx context.Context) {
	var wg sync.WaitGroup
	for range labelWorkers {
		wg.Go(func() {
			for lb.work(ctx) {
			}
		})
	}
	<-ctx.Done()
	lb.queue.ShutDown()
	wg.Wait()
}

// work labels one queued object; false once the queue is shut down.
func (lb *labeller) work(ctx context.Context) bool {
	key, quit := lb.queue.Get()
	if quit {
		return false
	}
	defer lb.queue.Done(key)
	l := lb.l
	obj := l.find(key)
	if obj == nil {
		lb.queue.Forget(key) // deleted, or no longer held
		return true
	}
	_, value, ok := lb.wants(obj)
	if !ok {
		lb.queue.Forget(key)
		return true
	}
	if lb.limiter != nil {
		if err := lb.limiter.Wait(ctx); err != nil {
			return true
		}
	}
	m, _ := meta.Accessor(obj)
	l.stats.Patches.Add(1)
	rv, err := l.opts.Client.PatchLabels(ctx, m.GetNamespace(), m.GetName(), map[string]string{l.opts.LabelKey: value})
	switch {
	case err == nil:
		lb.wrote(key, rv)
		lb.queue.Forget(key)
		lb.noteForeign(m)
	case apierrors.IsNotFound(err):
		lb.queue.Forget(key)
	case apierrors.IsForbidden(err):
		l.stats.PatchErrors.Add(1)
		l.mu.Lock()
		first := l.forbidden == ""
		l.forbidden = "the API server refuses to patch the kind's labels (" + err.Error() + "): its unlabelled objects stay cached by every replica that holds their partition, and are listed again when partitions move; grant the ring's service account patch on the kind"
		l.mu.Unlock()
		if first {
			l.log.Error(err, "cannot write partition labels; grant patch on this kind to the ring's service account")
		}
		lb.queue.Forget(key)
	default:
		l.stats.PatchErrors.Add(1)
		if ctx.Err() == nil {
			l.log.V(1).Info("labelling failed; retrying", "key", key, "error", err.Error())
			lb.queue.AddRateLimited(key)
		}
	}
	return true
}

// noteForeign counts an object just relabelled whose label key carried a
// value naming no partition, and logs the first: something other than the
// ring writes that key, and its writes cost a relabelling each.
func (lb *labeller) noteForeign(m metav1.Object) {
	l := lb.l
	old, has := m.GetLabels()[l.opts.LabelKey]
	if !has {
		return
	}
	if _, valid := partitionlabel.Parse(old, l.opts.Partitioner.Count()); valid {
		return
	}
	l.stats.ForeignValues.Add(1)
	lb.foreignOnce.Do(func() {
		l.log.Info("relabelled an object whose partition label names no partition of the ring; something else writes this label key (logged once per kind; the cache's mode report, KindMode.ForeignLabels, counts them)",
			"object", shard.KeyOf(m.GetNamespace(), m.GetName()), "label", l.opts.LabelKey, "value", old)
	})
}

// find returns the newest state of key in any view or the pending set,
// whatever partition it is in (nil when none holds it).
func (l *Labelled) find(key string) any {
	l.mu.Lock()
	defer l.mu.Unlock()
	found, _ := l.newest(key)
	return found
}
