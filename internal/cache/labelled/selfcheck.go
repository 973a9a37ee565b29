package labelled

import (
	"context"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kshard/kshard/internal/cache/cachekit"
	"github.com/kshard/kshard/internal/partitionlabel"
)

// The self-check of a Labelled: every CheckInterval it lists, as metadata,
// what it should hold — the objects labelled with a partition it reports
// synced, and the unlabelled ones (no label, or a value naming no
// partition) whose request maps to such a partition — and looks each up in
// its views and pending set by key and UID. A replica once reported
// partitions synced while its unlabelled view held none of their objects
// (issue 41), and nothing but users noticed; this is the alarm for that
// class of bug: a metric, an error log line, a readiness reason, and one
// relist of the views concerned.
//
// Only an object the store should have had for a whole interval counts:
// one missing from this check and from the previous at the same UID and
// resourceVersion, or one already at its current state when the previous
// check listed (its resourceVersion is at most that LIST's). An object that
// changed since, or a store that lags its watch by less than an interval,
// never counts. Objects labelled with a partition this replica does not
// hold whose request maps to one it holds (a third party's edit, relabelled
// by the holder of the label's partition) are not listed: finding them
// would mean listing the whole kind.

// DefaultCheckInterval is how often a Labelled checks its stores against
// the API server: one paged metadata LIST of its share (500 objects a
// request) every 5 minutes costs little beside the watches, and catches a
// missing object within two intervals.
const DefaultCheckInterval = 5 * time.Minute

// checkExamples bounds the keys of missing objects a report names.
const checkExamples = 5

// CheckReport is what a Labelled's self-check has found
// (Options.CheckInterval).
type CheckReport struct {
	// Checks counts the checks completed; Failed those whose LIST failed
	// (the next check compares with the last completed one).
	Checks, Failed int64
	// Missing is how many objects the last check found missing from the
	// cache: they exist on the API server in partitions it holds and
	// reports synced, unchanged for at least an interval. Examples names
	// up to 5 of them (namespace/name).
	Missing  int
	Examples []string
	// Relists counts the relists of the views that held too little,
	// started once each time a check finds objects missing after one
	// that found none.
	Relists int64
	// Checked is how many objects the last check compared, Requests how
	// many LISTs it sent, Took how long it took; At is when it ended.
	Checked, Requests int
	Took              time.Duration
	At                time.Time
}

// CheckReport returns the self-check's report, or nil when the check is
// off (a negative CheckInterval).
func (l *Labelled) CheckReport() *CheckReport {
	if l.opts.CheckInterval < 0 {
		return nil
	}
	l.checkMu.Lock()
	defer l.checkMu.Unlock()
	r := l.checked
	r.Examples = slices.Clone(r.Examples)
	return &r
}

// checkState is what one check leaves the next. The check loop owns it.
type checkState struct {
	suspects map[string]suspect // the objects the check found missing, confirmed or not
	listRV   uint64             // the older of its LISTs' resourceVersions (0: unknown)
	relisted bool               // a relist was started since a check last found nothing missing
}

// suspect is an object a check found missing.
type suspect struct {
	uid        types.UID
	rv         uint64
	unlabelled bool // listed as unlabelled: the unlabelled view should hold it
}

// checkLoop checks every CheckInterval until ctx ends. The first check
// waits an interval: partitions sync at the start, and a check compares
// only those that have.
func (l *Labelled) checkLoop(ctx context.Context) {
	t := l.opts.Clock.NewTicker(l.opts.CheckInterval)
	defer t.Stop()
	var st checkState
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		l.checkOnce(ctx, &st)
	}
}

// checkOnce runs one check against st, the previous one's state, and
// records its report; a check whose LIST fails leaves st as it was.
func (l *Labelled) checkOnce(ctx context.Context, st *checkState) {
	start := l.opts.Clock.Now()
	synced := l.SyncedPartitions()
	found := map[string]suspect{}
	checked, requests := 0, 0
	var listRV uint64
	compare := func(unlabelled bool) func(runtime.Object, []runtime.Object) error {
		return func(page runtime.Object, items []runtime.Object) error {
			requests++
			if lm, err := meta.ListAccessor(page); err == nil {
				if rv, _ := strconv.ParseUint(lm.GetResourceVersion(), 10, 64); rv > 0 && (listRV == 0 || rv < listRV) {
					listRV = rv
				}
			}
			// A partition released, or gained again and not synced yet,
			// since the check began is not compared.
			still := l.SyncedPartitions()
			l.mu.Lock()
			defer l.mu.Unlock()
			for _, it := range items {
				p, ok := requestPartition(l.opts.Partitioner, l.opts.Route, it)
				if !ok || !synced.Has(p) || !still.Has(p) {
					continue
				}
				checked++
				key, uid := keyAndUID(it)
				// A newer state of another UID: the listed object was
				// deleted and created again since, and the cache has that.
				if cached, err := l.newest(key); err == nil && cached != nil && (uidOf(cached) == uid || newer(cached, it)) {
					continue
				}
				found[key] = suspect{uid: uid, rv: cachekit.ResourceVersion(it), unlabelled: unlabelled}
			}
			return nil
		}
	}
	var err error
	if !synced.IsEmpty() {
		inHeld, _ := partitionlabel.SelectorIn(l.opts.LabelKey, synced)
		err = cachekit.EachPage(ctx, l.opts.CheckList, metav1.ListOptions{LabelSelector: inHeld}, compare(false))
		if err == nil {
			unlabelled := partitionlabel.SelectorUnlabelled(l.opts.LabelKey, l.opts.Partitioner.Count())
			err = cachekit.EachPage(ctx, l.opts.CheckList, metav1.ListOptions{LabelSelector: unlabelled}, compare(true))
		}
	}
	if err != nil {
		l.checkMu.Lock()
		l.checked.Failed++
		l.checkMu.Unlock()
		if ctx.Err() == nil {
			l.log.Info("the cache's self-check could not list the kind; it checks again at the next interval", "error", err.Error())
		}
		return
	}

	var missing []string
	relistSegments, relistUnlabelled := false, false
	for key, s := range found {
		prev, before := st.suspects[key]
		if (before && prev.uid == s.uid && prev.rv == s.rv) || (st.listRV > 0 && s.rv <= st.listRV) {
			missing = append(missing, key)
			relistUnlabelled = relistUnlabelled || s.unlabelled
			relistSegments = relistSegments || !s.unlabelled
		}
	}
	slices.Sort(missing)
	examples := missing[:min(len(missing), checkExamples)]
	st.suspects, st.listRV = found, listRV
	relist := len(missing) > 0 && !st.relisted
	st.relisted = len(missing) > 0

	l.checkMu.Lock()
	wasMissing := l.checked.Missing
	l.checked.Checks++
	l.checked.Missing, l.checked.Examples = len(missing), examples
	l.checked.Checked, l.checked.Requests = checked, requests
	l.checked.Took, l.checked.At = l.opts.Clock.Since(start), l.opts.Clock.Now()
	if relist {
		l.checked.Relists++
	}
	l.checkMu.Unlock()

	l.log.V(1).Info("cache self-check", "checked", checked, "missing", len(missing), "requests", requests, "took", l.opts.Clock.Since(start).Round(time.Millisecond).String())
	switch {
	case relist:
		l.log.Error(nil, "objects of partitions this replica holds and reports synced exist on the API server, unchanged for at least a check interval, but are missing from its cache; listing the kind again",
			"missing", len(missing), "examples", examples, "checked", checked, "labelSegments", relistSegments, "unlabelledView", relistUnlabelled)
		l.relist(relistSegments, relistUnlabelled)
	case len(missing) > 0:
		l.log.Error(nil, "objects of partitions this replica holds and reports synced are still missing from its cache after it listed the kind again; restart the replica, and report this as a bug",
			"missing", len(missing), "examples", examples, "checked", checked)
	case wasMissing > 0:
		l.log.Info("the cache's self-check finds every object again", "checked", checked)
	}
}

// relist lists the views that missed objects again: the label segments in
// one compaction, the unlabelled view in a new view; each replaces the
// running ones once synced, so nothing stops being served meanwhile.
func (l *Labelled) relist(segments, unlabelled bool) {
	if segments {
		l.segs.Relist()
	}
	if !unlabelled {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx != nil && !l.stopped {
		l.startUnlabelled(l.held.Clone())
	}
}
