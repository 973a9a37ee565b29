package crshard

import (
	"errors"
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	crmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Builder is controller-runtime's builder (builder.Builder) for a
// controller that reconciles only the keys of partitions active on this
// replica: the same methods, passed through, plus the gated queue and the
// wrapped reconciler at Complete or Build.
type Builder struct {
	ring         *Ring
	mgr          crmanager.Manager
	b            *builder.Builder
	opts         controller.Options
	forObj       client.Object
	metadataOnly bool
	routes       []route // for the sharded cache (cacheroutes.go)
	watches      []*watchReplay
	err          error
}

// NewControllerManagedBy replaces ctrl.NewControllerManagedBy(mgr) to opt a
// controller into the ring; it sets the ring up with mgr
// (SetupWithManager) the first time.
func (r *Ring) NewControllerManagedBy(mgr crmanager.Manager) *Builder {
	return &Builder{ring: r, mgr: mgr, b: builder.ControllerManagedBy(mgr), err: r.SetupWithManager(mgr)}
}

// For is builder.For; its objects are what replay enqueues.
func (b *Builder) For(object client.Object, opts ...builder.ForOption) *Builder {
	b.forObj = object
	b.routes = append(b.routes, forRoute(object, opts))
	for _, o := range opts {
		if o == builder.OnlyMetadata {
			b.metadataOnly = true
		}
	}
	b.b = b.b.For(object, opts...)
	return b
}

// Owns is builder.Owns. Its events map an object to its controlling owner,
// a For object, so the For replay covers what they would replay.
func (b *Builder) Owns(object client.Object, opts ...builder.OwnsOption) *Builder {
	b.routes = append(b.routes, ownsRoute(object, opts))
	b.b = b.b.Owns(object, opts...)
	return b
}

// Watches is builder.Watches. On activation the ring runs h over the
// cached objects whose events passed the watch's predicates (see the
// package doc), so the requests it maps them to are replayed.
func (b *Builder) Watches(object client.Object, h handler.TypedEventHandler[client.Object, reconcile.Request], opts ...builder.WatchesOption) *Builder {
	b.routes = append(b.routes, watchesRoute(object, h, false, opts))
	metadataOnly := slices.ContainsFunc(opts, func(o builder.WatchesOption) bool { return o == builder.OnlyMetadata })
	b.b = b.b.Watches(object, b.replayed("Watches", object, h, metadataOnly), opts...)
	return b
}

// WatchesMetadata is builder.WatchesMetadata, replayed as Watches is.
func (b *Builder) WatchesMetadata(object client.Object, h handler.TypedEventHandler[client.Object, reconcile.Request], opts ...builder.WatchesOption) *Builder {
	b.routes = append(b.routes, watchesRoute(object, h, true, opts))
	b.b = b.b.WatchesMetadata(object, b.replayed("WatchesMetadata", object, h, true), opts...)
	return b
}

// replayed returns the handler to give controller-runtime for a watch of
// object with h: h wrapped to be replayed, or h when the watch is invalid
// (the error is reported by Build).
func (b *Builder) replayed(method string, object client.Object, h handler.EventHandler, metadataOnly bool) handler.EventHandler {
	what := fmt.Sprintf("%s(%T)", method, object)
	if h == nil || object == nil {
		b.err = errors.Join(b.err, fmt.Errorf("crshard: %s: the object and the event handler must not be nil", what))
		return h
	}
	if b.mgr == nil {
		return h // NewControllerManagedBy reported it
	}
	w, err := newWatchReplay(what, object, h, b.mgr.GetScheme(), metadataOnly)
	if err != nil {
		b.err = errors.Join(b.err, err)
		return h
	}
	b.watches = append(b.watches, w)
	return w
}

// RawSourceOption configures WatchesRawSource.
type RawSourceOption func(*rawSourceOptions)

type rawSourceOptions struct{ allowUnreplayed bool }

// AllowUnreplayed accepts a raw source the ring cannot replay: its events
// for a partition that is not active here when they arrive (owned by
// another replica, or moving) are dropped and never delivered again. Pass
// it only when the source's senders resend, or losing those events is
// acceptable.
func AllowUnreplayed() RawSourceOption {
	return func(o *rawSourceOptions) { o.allowUnreplayed = true }
}

// WatchesRawSource is builder.WatchesRawSource. The ring cannot replay a
// raw source, so Build refuses one unless AllowUnreplayed is passed; a
// source.Kind is replayed when watched with Watches instead.
func (b *Builder) WatchesRawSource(src source.TypedSource[reconcile.Request], opts ...RawSourceOption) *Builder {
	var o rawSourceOptions
	for _, opt := range opts {
		opt(&o)
	}
	if !o.allowUnreplayed {
		name := fmt.Sprintf("%T", src)
		if s, ok := src.(fmt.Stringer); ok {
			name = s.String()
		}
		b.err = errors.Join(b.err, fmt.Errorf("crshard: WatchesRawSource(%s): the ring cannot replay a raw source when it activates partitions here, so the events it delivers while their partition is owned by another replica or moving would be lost; watch the kind with Watches(object, handler, builder.WithPredicates(...)), which is replayed, or pass crshard.AllowUnreplayed() to accept that", name))
	}
	b.b = b.b.WatchesRawSource(src)
	return b
}

// WithEventFilter is builder.WithEventFilter.
func (b *Builder) WithEventFilter(p predicate.Predicate) *Builder {
	b.b = b.b.WithEventFilter(p)
	return b
}

// WithOptions is builder.WithOptions; NewQueue, if set, builds the queue
// the gate wraps.
func (b *Builder) WithOptions(options controller.Options) *Builder {
	b.opts = options
	return b
}

// WithLogConstructor is builder.WithLogConstructor.
func (b *Builder) WithLogConstructor(f func(*reconcile.Request) logr.Logger) *Builder {
	b.opts.LogConstructor = f
	return b
}

// Named is builder.Named.
func (b *Builder) Named(name string) *Builder {
	b.b = b.b.Named(name)
	return b
}

// Complete is builder.Complete for the sharded controller.
func (b *Builder) Complete(r reconcile.Reconciler) error {
	_, err := b.Build(r)
	return err
}

// Build is builder.Build for the sharded controller.
func (b *Builder) Build(r reconcile.Reconciler) (controller.Controller, error) {
	if b.err != nil {
		return nil, b.err
	}
	c := &sharded{ring: b.ring, cache: b.mgr.GetCache(), working: make(chan struct{}), watches: b.watches}
	if b.forObj != nil {
		list, err := listFunc(b.forObj, b.mgr.GetScheme(), b.metadataOnly)
		if err != nil {
			return nil, err
		}
		c.forList = list
	}
	if err := b.ring.checkNotStarted(); err != nil {
		return nil, err
	}
	if err := declareRoutes(b.mgr.GetCache(), b.mgr.GetScheme(), b.routes); err != nil {
		return nil, err
	}
	global := b.mgr.GetControllerOptions()
	opts := b.opts
	if opts.Logger.GetSink() == nil {
		opts.Logger = global.Logger
		if opts.Logger.GetSink() == nil {
			opts.Logger = b.mgr.GetLogger()
		}
	}
	opts = c.options(opts, usePriorityQueue(opts.UsePriorityQueue, global.UsePriorityQueue))
	var wrapped reconcile.Reconciler
	if r != nil {
		wrapped = c.reconciler(r)
	}
	ctl, err := b.b.WithOptions(opts).Build(wrapped)
	if err != nil {
		b.ring.optedIn.takeOne() // never added
		return nil, err
	}
	// Registered only once built: the ring waits for every registered
	// controller's workers before it joins.
	if err := b.ring.register(c); err != nil {
		return nil, err
	}
	return ctl, nil
}

// Options opts a controller built with controller.New into the ring:
// it returns options with the gated queue and options.Reconciler wrapped.
// forObj is the type the controller reconciles, whose cached objects are
// replayed on activation (nil: no replay). The ring waits for the
// controller's workers before it joins, so do not start the manager if
// controller.New fails.
func (r *Ring) Options(mgr crmanager.Manager, options controller.Options, forObj client.Object) (controller.Options, error) {
	if err := r.SetupWithManager(mgr); err != nil {
		return options, err
	}
	c := &sharded{ring: r, cache: mgr.GetCache(), working: make(chan struct{})}
	if forObj != nil {
		list, err := listFunc(forObj, mgr.GetScheme(), false)
		if err != nil {
			return options, err
		}
		c.forList = list
		if err := declareRoutes(mgr.GetCache(), mgr.GetScheme(), []route{forRoute(forObj, nil)}); err != nil {
			return options, err
		}
	}
	if err := r.register(c); err != nil {
		return options, err
	}
	global := mgr.GetControllerOptions()
	if options.Logger.GetSink() == nil {
		options.Logger = global.Logger
		if options.Logger.GetSink() == nil {
			options.Logger = mgr.GetLogger()
		}
	}
	if options.Reconciler != nil {
		options.Reconciler = c.reconciler(options.Reconciler)
	}
	return c.options(options, usePriorityQueue(options.UsePriorityQueue, global.UsePriorityQueue)), nil
}
