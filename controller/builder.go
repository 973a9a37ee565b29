package controller

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kshard/kshard/shard"
)

// Manager is what a Builder needs from the manager that will run its
// controller. kshard's manager implements it; internal/controllertest's Manager is
// small double for tests.
//
// Add receives the built Controller (a Runnable): the manager starts it with
// its context and, when it shards, keeps it to call Activate and Revoke as
// it claims and releases partitions (recognise it with a type assertion to
// Controller).
type Manager interface {
	// GetInformers returns the shared informer cache that sources read from.
	GetInformers() Informers
	// GetScheme returns the scheme mapping Go types to kinds.
	GetScheme() *runtime.Scheme
	// GetRESTMapper returns the mapper telling which kinds are served and
	// whether they are namespaced.
	GetRESTMapper() meta.RESTMapper
	// GetLogger returns the logger controllers default to.
	GetLogger() logr.Logger
	// GetControllerOptions returns the options the manager imposes on its
	// controllers. Unset fields of a Builder's options are taken from it;
	// its Partitioner (the ring's), StartInactive (true when sharding) and
	// LeaseValidity always apply. RateLimiter is not taken from it: a rate limiter keeps
	// per-item state and must not be shared between controllers.
	GetControllerOptions() Options
	// Add registers a runnable to be started with the manager.
	Add(Runnable) error
}

// Builder builds a controller and adds it to a Manager, in the shape of
// controller-runtime's builder. Errors are collected and reported by Build.
type Builder struct {
	mgr       Manager
	forInput  *watchInput
	forCalls  int
	owns      []watchInput
	watches   []watchInput
	sources   []Source
	filters   []Predicate
	opts      Options
	name      string
	errs      []error
	completed bool
}

type watchInput struct {
	obj     Object
	handler EventHandler
	preds   []Predicate
}

// NewControllerManagedBy starts building a controller run by mgr.
func NewControllerManagedBy(mgr Manager) *Builder {
	return &Builder{mgr: mgr}
}

// For names the kind the controller reconciles: events on obj's kind enqueue
// the object's own Request. Call it once. A *metav1.PartialObjectMetadata
// with TypeMeta set watches metadata only.
func (b *Builder) For(obj Object, preds ...Predicate) *Builder {
	b.forCalls++
	if b.forCalls > 1 {
		b.errs = append(b.errs, errors.New("For called more than once; a controller reconciles one kind (use Watches for others)"))
		return b
	}
	b.forInput = &watchInput{obj: obj, handler: EnqueueRequestForObject{}, preds: preds}
	return b
}

// Owns watches obj's kind and enqueues the Request of each object's
// controlling owner of the For kind.
func (b *Builder) Owns(obj Object, preds ...Predicate) *Builder {
	b.owns = append(b.owns, watchInput{obj: obj, preds: preds})
	return b
}

// Watches watches obj's kind with handler h.
func (b *Builder) Watches(obj Object, h EventHandler, preds ...Predicate) *Builder {
	if h == nil {
		b.errs = append(b.errs, fmt.Errorf("Watches(%T): event handler is nil", obj))
	}
	b.watches = append(b.watches, watchInput{obj: obj, handler: h, preds: preds})
	return b
}

// WatchesSource adds a ready-made source, such as a Channel. Under a
// sharding manager, Build refuses a source that is not a ReplayableSource
// (a Channel) unless Options.AllowUnreplayedSources is set: nothing would
// deliver again the events it dropped for partitions not active here.
func (b *Builder) WatchesSource(src Source) *Builder {
	if src == nil {
		b.errs = append(b.errs, errors.New("WatchesSource: source is nil"))
	}
	b.sources = append(b.sources, src)
	return b
}

// WithEventFilter adds a predicate applied to every watch of the builder
// (For, Owns, Watches; not WatchesSource).
func (b *Builder) WithEventFilter(p Predicate) *Builder {
	if p == nil {
		b.errs = append(b.errs, errors.New("WithEventFilter: predicate is nil"))
		return b
	}
	b.filters = append(b.filters, p)
	return b
}

// WithOptions sets the controller's options (see Manager for how they
// combine with the manager's).
func (b *Builder) WithOptions(opts Options) *Builder {
	b.opts = opts
	return b
}

// Named sets the controller's name. Defaults to the For kind, lowercased.
func (b *Builder) Named(name string) *Builder {
	b.name = name
	return b
}

// Complete builds the controller and adds it to the manager.
func (b *Builder) Complete(r Reconciler) error {
	_, err := b.Build(r)
	return err
}

// Build builds the controller, adds it to the manager and returns it. It
// checks every watched kind against the scheme and the API server's
// resources, so mistakes surface here rather than when the manager starts.
func (b *Builder) Build(r Reconciler) (Controller, error) {
	if b.completed {
		return nil, errors.New("controller builder: Build called twice; use a new builder for each controller")
	}
	if err := b.validate(r); err != nil {
		return nil, err
	}
	b.completed = true
	scheme, mapper, informers := b.mgr.GetScheme(), b.mgr.GetRESTMapper(), b.mgr.GetInformers()

	var errs []error
	// An unserved kind fails the build. Any other mapping error (the API
	// server is unreachable at startup) is not the user's mistake: the
	// mapping is retried when the controller starts, by which time the
	// manager has waited for the API server.
	mappingDeferred := false
	check := func(role string, in watchInput) string {
		gvk, err := kindOf(scheme, in.obj)
		if err == nil {
			_, err = restMapping(mapper, gvk)
			if err != nil && !meta.IsNoMatchError(err) {
				mappingDeferred, err = true, nil
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", role, err))
			return ""
		}
		return gvk.Kind
	}
	name := b.name
	if b.forInput != nil {
		if kind := check("For", *b.forInput); name == "" {
			name = strings.ToLower(kind)
		}
	}
	for _, in := range b.owns {
		check("Owns", in)
	}
	for _, in := range b.watches {
		check("Watches", in)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("controller builder %s: %w", name, err)
	}

	if err := b.declareRoutes(informers); err != nil {
		return nil, fmt.Errorf("controller builder %s: %w", name, err)
	}
	opts, err := b.options()
	if err != nil {
		return nil, fmt.Errorf("controller builder %s: %w", name, err)
	}
	// Before New, which claims the name.
	for _, src := range b.sources {
		if err := checkReplayable(src, opts); err != nil {
			return nil, fmt.Errorf("controller builder %s: WatchesSource: %w", name, err)
		}
	}
	c, err := New(name, r, opts)
	if err != nil {
		return nil, err
	}

	var srcs []Source
	withFilters := func(preds []Predicate) []Predicate {
		return append(append([]Predicate{}, b.filters...), preds...)
	}
	if b.forInput != nil {
		srcs = append(srcs, Kind(informers, b.forInput.obj, b.forInput.handler, withFilters(b.forInput.preds)...))
	}
	for _, in := range b.owns {
		// Its error does not name the controller: when deferred, the
		// controller's Start names it.
		ownsSource := func() (Source, error) {
			h, err := EnqueueRequestForOwner(scheme, mapper, b.forInput.obj, OnlyControllerOwner())
			if err != nil {
				return nil, fmt.Errorf("Owns(%T): %w", in.obj, err)
			}
			return Kind(informers, in.obj, h, withFilters(in.preds)...), nil
		}
		if mappingDeferred {
			srcs = append(srcs, &deferredSource{name: fmt.Sprintf("owner source: %T", in.obj), build: ownsSource})
			continue
		}
		src, err := ownsSource()
		if err != nil {
			return nil, fmt.Errorf("controller %q: %w", name, err)
		}
		srcs = append(srcs, src)
	}
	for _, in := range b.watches {
		srcs = append(srcs, Kind(informers, in.obj, in.handler, withFilters(in.preds)...))
	}
	srcs = append(srcs, b.sources...)
	for _, src := range srcs {
		if err := c.Watch(src); err != nil {
			return nil, err
		}
	}
	if err := b.mgr.Add(c); err != nil {
		return nil, fmt.Errorf("controller %q: adding it to the manager: %w", name, err)
	}
	return c, nil
}

// routeDeclarer is an informer cache that needs to know how sources map
// each kind to requests: the manager's cache sharded by partition labels
// labels an object with the partition of the request it maps to.
type routeDeclarer interface {
	DeclareRoute(obj Object, route shard.Route) error
}

// declareRoutes tells a routeDeclarer how this controller's sources map
// their kinds: For to the object's own key, Owns to its controller owner's,
// Watches by its handler (a map function: shard.RouteMapped).
func (b *Builder) declareRoutes(informers Informers) error {
	rd, ok := informers.(routeDeclarer)
	if !ok {
		return nil
	}
	var errs []error
	if b.forInput != nil {
		errs = append(errs, rd.DeclareRoute(b.forInput.obj, shard.RouteSelf))
	}
	for _, in := range b.owns {
		errs = append(errs, rd.DeclareRoute(in.obj, shard.RouteOwner))
	}
	for _, in := range b.watches {
		errs = append(errs, rd.DeclareRoute(in.obj, routeOf(in.handler)))
	}
	return errors.Join(errs...)
}

// routeOf returns how handler h maps an object to requests.
func routeOf(h EventHandler) shard.Route {
	switch h := h.(type) {
	case EnqueueRequestForObject, *EnqueueRequestForObject:
		return shard.RouteSelf
	case *ownerHandler:
		// Every owner, or a cluster-scoped one, is not the one
		// "namespace/controller-owner" key RouteOwner names.
		if h.onlyController && h.namespaced {
			return shard.RouteOwner
		}
	}
	return shard.RouteMapped
}

func (b *Builder) validate(r Reconciler) error {
	var errs []error
	if b.mgr == nil {
		errs = append(errs, errors.New("manager is nil; pass the manager to NewControllerManagedBy"))
	}
	if r == nil {
		errs = append(errs, errors.New("reconciler is nil; pass your Reconciler to Complete or Build"))
	} else if f, ok := r.(ReconcilerFunc); ok && f == nil {
		errs = append(errs, errors.New("reconciler is a nil ReconcilerFunc; pass a function"))
	}
	if b.forInput == nil {
		if b.name == "" {
			errs = append(errs, errors.New("no For kind and no name; call For(obj), or Named(name) for a controller without a primary kind"))
		}
		if len(b.owns) > 0 {
			errs = append(errs, errors.New("Owns needs For: the For kind is the owner whose requests are enqueued"))
		}
		if len(b.watches) == 0 && len(b.sources) == 0 {
			errs = append(errs, errors.New("nothing to watch; call For, Watches or WatchesSource"))
		}
	}
	errs = append(errs, b.errs...)
	if b.mgr != nil {
		if b.mgr.GetScheme() == nil {
			errs = append(errs, errors.New("the manager has no scheme"))
		}
		if b.mgr.GetRESTMapper() == nil {
			errs = append(errs, errors.New("the manager has no RESTMapper"))
		}
		if b.mgr.GetInformers() == nil {
			errs = append(errs, errors.New("the manager has no informer cache"))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("controller builder: %w", err)
	}
	return nil
}

// options combines the builder's options with the manager's: the builder's
// set fields win, except the manager's Partitioner, StartInactive and
// LeaseValidity, which define the ring the controller takes part in.
func (b *Builder) options() (Options, error) {
	o, m := b.opts, b.mgr.GetControllerOptions()
	if m.Partitioner != nil {
		if o.Partitioner != nil && o.Partitioner.Count() != m.Partitioner.Count() {
			return o, fmt.Errorf("Options.Partitioner has %d partitions but the manager's ring has %d; leave Partitioner unset under a manager", o.Partitioner.Count(), m.Partitioner.Count())
		}
		o.Partitioner = m.Partitioner
	}
	o.StartInactive = o.StartInactive || m.StartInactive
	if m.LeaseValidity != nil {
		o.LeaseValidity = m.LeaseValidity
	}
	if o.MaxConcurrentReconciles == 0 {
		o.MaxConcurrentReconciles = m.MaxConcurrentReconciles
	}
	if o.RecoverPanic == nil {
		o.RecoverPanic = m.RecoverPanic
	}
	if o.ReconcileTimeout == 0 {
		o.ReconcileTimeout = m.ReconcileTimeout
	}
	if o.CacheSyncTimeout == 0 {
		o.CacheSyncTimeout = m.CacheSyncTimeout
	}
	if o.Logger.GetSink() == nil {
		o.Logger = m.Logger
	}
	if o.Logger.GetSink() == nil {
		o.Logger = b.mgr.GetLogger()
	}
	if o.DrainGracePeriod == 0 {
		o.DrainGracePeriod = m.DrainGracePeriod
	}
	if o.DrainReportAfter == 0 {
		o.DrainReportAfter = m.DrainReportAfter
	}
	if o.Registerer == nil {
		o.Registerer = m.Registerer
	}
	o.SkipNameValidation = o.SkipNameValidation || m.SkipNameValidation
	o.AllowUnreplayedSources = o.AllowUnreplayedSources || m.AllowUnreplayedSources
	return o, nil
}
