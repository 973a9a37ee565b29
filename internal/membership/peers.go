package membership

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/kshard/kshard/internal/assign"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kshard/kshard/lease"
)

// peers is the watch of the ring's Leases. It is the store of a client-go
// Reflector (rather than an informer) so that it can stamp each new
// resourceVersion with the local time it arrived, and so that the reflector's
// retry backoff can be capped: after an API server outage the view must
// recover within seconds, not the informer default of up to 30s.
type peers struct {
	m *Member

	// mu guards the fields below; it is taken before Member.mu.
	mu     sync.Mutex
	byName map[string]Observed
	// departed holds, per Lease object (name and UID), the last state of
	// a Lease that left the view, as the watch event that removed it
	// carried it (a deletion, or a relabel out of the ring's selector),
	// with Gone set and LastChange the local time it left. It is kept per
	// object, and across the name's re-creation, because a watch that
	// lagged across two departures of one name sees the claim of the first
	// object only in its departure. See Member.Departed.
	departed map[objectKey]departure
	// departures counts departures, to report them in the order they came.
	departures uint64
	// problems remembers, per Lease, what was last logged and counted
	// about it (see reportKey), so that each malformed version, and each
	// foreign configuration, is reported once.
	problems map[string]string
	synced   bool
}

// objectKey names one Lease object: a name is reused when a Lease is
// deleted and created again, a UID is not.
type objectKey struct {
	name string
	uid  string
}

// departure is a departed Lease and the order it left in.
type departure struct {
	o   Observed
	seq uint64
}

func newPeers(m *Member) *peers {
	return &peers{m: m, byName: map[string]Observed{}, departed: map[objectKey]departure{}, problems: map[string]string{}}
}

// run lists and watches the ring's Leases until ctx is done.
func (p *peers) run(ctx context.Context) {
	m := p.m
	logger := m.log.WithName("watch")
	r := cache.NewReflectorWithOptions(p.listWatch(), &coordinationv1.Lease{}, p, cache.ReflectorOptions{
		Name:            "kshard-lease/" + m.opts.Ring,
		TypeDescription: "coordination.k8s.io/v1 Lease",
		Logger:          &logger,
		Backoff: &wait.Backoff{
			Duration: acquireBackoffInitial, Factor: 2, Jitter: 0.2, Steps: 100, Cap: acquireBackoffMax,
		},
	})
	r.RunWithContext(klog.NewContext(ctx, logger))
}

func (p *peers) listWatch() cache.ListerWatcher {
	m := p.m
	leases := m.leases
	selector := labels.Set{lease.LabelRing: m.opts.Ring}.String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector = selector
			list, err := leases.List(ctx, opts)
			if err != nil {
				p.checkForbidden(err, "list")
				return nil, err
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = selector
			w, err := leases.Watch(ctx, opts)
			if err != nil {
				p.checkForbidden(err, "watch")
				return nil, err
			}
			return w, nil
		},
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, m.opts.Client)
}

// checkForbidden stops Run on an RBAC refusal; the reflector would retry it
// forever, and a replica that cannot see its peers must not run.
func (p *peers) checkForbidden(err error, verb string) {
	if apierrors.IsForbidden(err) {
		p.m.fail(newForbiddenError(err, verb, p.m.opts.Namespace, ""))
	}
}

func (p *peers) hasSynced() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.synced
}

func (p *peers) snapshot() []Observed {
	p.mu.Lock()
	out := make([]Observed, 0, len(p.byName))
	for _, o := range p.byName {
		o.Claim = o.Claim.Clone() // callers may mutate their copy
		out = append(out, o)
	}
	p.mu.Unlock()
	slices.SortFunc(out, func(a, b Observed) int {
		return cmp.Or(cmp.Compare(a.Identity, b.Identity), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// The cache.ReflectorStore methods. The reflector calls them from its one
// goroutine; an error would only make it relist, so they return nil.

func (p *peers) Add(obj any) error { return p.Update(obj) }
func (p *peers) Resync() error     { return nil }

func (p *peers) Update(obj any) error {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return nil
	}
	now := p.m.clock.Now()
	return p.locked(func() (bool, error) { return p.observe(l, now) })
}

func (p *peers) Delete(obj any) error {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return nil
	}
	now := p.m.clock.Now()
	return p.locked(func() (bool, error) { return p.depart(l, now) })
}

// Replace is called after every (re)list with the complete state.
func (p *peers) Replace(list []any, _ string) error {
	return p.locked(func() (bool, error) { return p.replaceAll(list) })
}

// locked runs f under p.mu, then reports its outcome outside the lock.
func (p *peers) locked(f func() (changed bool, fatal error)) error {
	p.mu.Lock()
	changed, fatal := f()
	p.mu.Unlock()
	if fatal != nil {
		p.m.fail(fatal)
	}
	if changed {
		p.m.notify()
	}
	return nil
}

// replaceAll is the Replace proper: observe the listed Leases, forget the
// ones no longer listed, and mark the view synced.
func (p *peers) replaceAll(list []any) (changed bool, fatal error) {
	now := p.m.clock.Now()
	listed := make(map[string]bool, len(list))
	for _, obj := range list {
		l, ok := obj.(*coordinationv1.Lease)
		if !ok {
			continue
		}
		listed[l.Name] = true
		c, f := p.observe(l, now)
		changed = changed || c
		fatal = cmp.Or(fatal, f)
	}
	for name := range p.byName {
		if !listed[name] {
			c, f := p.remove(name)
			changed = changed || c
			fatal = cmp.Or(fatal, f)
		}
	}
	if !p.synced {
		p.synced, changed = true, true
	}
	return changed, fatal
}

// observe records one Lease version; p.mu is held.
func (p *peers) observe(l *coordinationv1.Lease, now time.Time) (changed bool, fatal error) {
	m := p.m
	if l.Labels[lease.LabelRing] != m.opts.Ring {
		// Relabelled out of the ring (or a watch that does not filter).
		return p.depart(l, now)
	}
	// The object is back in the view (relabelled into the ring again):
	// this state supersedes its departure. Other objects of the name keep
	// theirs.
	delete(p.departed, objectKey{l.Name, string(l.UID)})
	if prev, ok := p.byName[l.Name]; ok && prev.Version == l.ResourceVersion {
		return false, nil
	}
	o, reasons := parse(l, m.opts.Ring, m.opts.Partitions)
	o.LastChange = now
	p.byName[l.Name] = o
	p.report(l, o, reasons)
	return true, nil
}

// report logs and counts what is wrong with a Lease version once per
// change; p.mu is held. A Lease written with another ring configuration
// (a replica run with other Partitions or Load: its fingerprint differs)
// is a foreign configuration, not a malformed Lease, even though its claim
// does not decode over this ring's partitions: it is reported when its
// configuration first appears or changes, not on every renewal. What
// handoff makes of it (a replica refuses to join while a foreign member is
// active) is the core's decision.
func (p *peers) report(l *coordinationv1.Lease, o Observed, reasons []string) {
	m := p.m
	foreign := o.Fingerprint != "" && m.opts.Params != "" && o.Fingerprint != m.opts.Params
	key := l.ResourceVersion
	switch {
	case foreign:
		key = "foreign " + o.Fingerprint
	case len(reasons) == 0:
		delete(p.problems, l.Name)
		return
	}
	if p.problems[l.Name] == key {
		return
	}
	p.problems[l.Name] = key
	if foreign {
		m.metrics.invalid.WithLabelValues(reasonForeignConfig).Inc()
		m.log.Info("a Lease of the ring was written with another ring configuration (foreign configuration); this replica does not share the ring with it while it is active",
			"foreign", l.Namespace+"/"+l.Name, "identity", o.Identity, "differs", assign.FingerprintDiff(m.opts.Params, o.Fingerprint),
			"theirs", o.Fingerprint, "ours", m.opts.Params)
		return
	}
	for _, r := range reasons {
		m.metrics.invalid.WithLabelValues(r).Inc()
	}
	m.log.Info("a Lease labelled with the ring is malformed; it is not trusted as a member",
		"malformed", l.Namespace+"/"+l.Name, "version", l.ResourceVersion, "problem", o.Problem, "claimUnknown", o.ClaimUnknown)
}

// depart records the last state of a Lease that left the view (l is the
// object the event carried) and forgets it from the view; p.mu is held.
func (p *peers) depart(l *coordinationv1.Lease, now time.Time) (changed bool, fatal error) {
	if _, ok := p.byName[l.Name]; ok || l.Labels[lease.LabelRing] == p.m.opts.Ring {
		o, _ := parse(l, p.m.opts.Ring, p.m.opts.Partitions)
		o.Gone, o.LastChange = true, now
		p.departures++
		p.departed[objectKey{l.Name, string(l.UID)}] = departure{o: o, seq: p.departures}
		changed = true
	}
	c, f := p.remove(l.Name)
	return changed || c, f
}

// departedSnapshot returns the departed Leases, sorted by name and, within
// a name, in the order they left; it forgets those that left more than
// departedFor ago.
func (p *peers) departedSnapshot(now time.Time) []Observed {
	p.mu.Lock()
	ds := make([]departure, 0, len(p.departed))
	for key, d := range p.departed {
		if now.Sub(d.o.LastChange) > departedFor*p.m.opts.LeaseDuration {
			delete(p.departed, key)
			continue
		}
		d.o.Claim = d.o.Claim.Clone()
		ds = append(ds, d)
	}
	p.mu.Unlock()
	slices.SortFunc(ds, func(a, b departure) int { return cmp.Or(cmp.Compare(a.o.Name, b.o.Name), cmp.Compare(a.seq, b.seq)) })
	out := make([]Observed, len(ds))
	for i, d := range ds {
		out[i] = d.o
	}
	return out
}

// holdsAll reports whether every Lease object (UID) in uids is in the view
// or has departed from it.
func (p *peers) holdsAll(uids []string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := make(map[string]bool, len(p.byName)+len(p.departed))
	for _, o := range p.byName {
		seen[o.UID] = true
	}
	for key := range p.departed {
		seen[key.uid] = true
	}
	for _, uid := range uids {
		if !seen[uid] {
			return false
		}
	}
	return true
}

// departedFor: departed Leases are reported for this many LeaseDurations,
// more than the 2 the handoff core needs.
const departedFor = 4

// remove forgets a Lease that was deleted or left the ring; p.mu is held.
func (p *peers) remove(name string) (changed bool, fatal error) {
	if _, ok := p.byName[name]; !ok {
		return false, nil
	}
	delete(p.byName, name)
	delete(p.problems, name)
	return true, nil
}
