package controller

import "maps"

// Predicate filters events before they reach an EventHandler. An event is
// handled only if every predicate of its watch returns true. A reconciler
// that writes the object it reconciles should filter its own writes out:
// see GenerationChangedPredicate.
type Predicate interface {
	Create(CreateEvent) bool
	Update(UpdateEvent) bool
	Delete(DeleteEvent) bool
	Generic(GenericEvent) bool
}

// Funcs is a Predicate built from optional functions; a nil function
// admits every event of its type.
type Funcs struct {
	CreateFunc  func(CreateEvent) bool
	UpdateFunc  func(UpdateEvent) bool
	DeleteFunc  func(DeleteEvent) bool
	GenericFunc func(GenericEvent) bool
}

func (f Funcs) Create(e CreateEvent) bool   { return f.CreateFunc == nil || f.CreateFunc(e) }
func (f Funcs) Update(e UpdateEvent) bool   { return f.UpdateFunc == nil || f.UpdateFunc(e) }
func (f Funcs) Delete(e DeleteEvent) bool   { return f.DeleteFunc == nil || f.DeleteFunc(e) }
func (f Funcs) Generic(e GenericEvent) bool { return f.GenericFunc == nil || f.GenericFunc(e) }

// NewPredicateFuncs returns a Predicate applying filter to the event's
// object (the new object of an update). A nil filter admits everything.
func NewPredicateFuncs(filter func(Object) bool) Predicate {
	if filter == nil {
		return Funcs{}
	}
	return Funcs{
		CreateFunc:  func(e CreateEvent) bool { return e.Object != nil && filter(e.Object) },
		UpdateFunc:  func(e UpdateEvent) bool { return e.ObjectNew != nil && filter(e.ObjectNew) },
		DeleteFunc:  func(e DeleteEvent) bool { return e.Object != nil && filter(e.Object) },
		GenericFunc: func(e GenericEvent) bool { return e.Object != nil && filter(e.Object) },
	}
}

// GenerationChangedPredicate admits updates that change metadata.generation
// (spec changes, for most kinds) and every other event.
//
// Use it on For when the reconciler writes the object it reconciles, most
// often its status: every write is an update event, so without a filter the
// reconciler's own write enqueues the object again, and a reconciler that
// writes on every pass (a timestamp, a condition's lastTransitionTime)
// reconciles it forever. A write to the status subresource leaves
// metadata.generation unchanged, so this predicate drops it while spec
// changes still get through; ResourceVersionChangedPredicate does not help,
// since every write changes the resourceVersion.
//
// It fits kinds whose API server bumps metadata.generation on spec changes:
// custom resources with the status subresource enabled, and built-in
// workloads such as Deployments. Kinds that never set it (ConfigMaps,
// Secrets) keep generation 0, so it would drop every update of them; for a
// custom resource without the status subresource every write, status
// included, bumps it. It also drops metadata-only changes: combine it with
// Or(GenerationChangedPredicate{}, LabelChangedPredicate{}) if labels or
// annotations drive the reconcile. Owned objects (Owns) usually need no
// filter: the reconciler's writes to them are what it waits to see settle.
type GenerationChangedPredicate struct{ Funcs }

func (GenerationChangedPredicate) Update(e UpdateEvent) bool {
	return e.ObjectOld != nil && e.ObjectNew != nil && e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration()
}

// ResourceVersionChangedPredicate admits updates that change
// metadata.resourceVersion (dropping resync no-ops) and every other event.
type ResourceVersionChangedPredicate struct{ Funcs }

func (ResourceVersionChangedPredicate) Update(e UpdateEvent) bool {
	return e.ObjectOld != nil && e.ObjectNew != nil && e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion()
}

// LabelChangedPredicate admits updates that change labels and every other event.
type LabelChangedPredicate struct{ Funcs }

func (LabelChangedPredicate) Update(e UpdateEvent) bool {
	return e.ObjectOld != nil && e.ObjectNew != nil && !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
}

// AnnotationChangedPredicate admits updates that change annotations and
// every other event.
type AnnotationChangedPredicate struct{ Funcs }

func (AnnotationChangedPredicate) Update(e UpdateEvent) bool {
	return e.ObjectOld != nil && e.ObjectNew != nil && !maps.Equal(e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations())
}

// And admits an event only if every predicate does (nil entries are ignored).
func And(ps ...Predicate) Predicate { return and(compact(ps)) }

// Or admits an event if any predicate does (nil entries are ignored; no
// predicates admit nothing).
func Or(ps ...Predicate) Predicate { return or(compact(ps)) }

// Not inverts p (a nil p admits nothing).
func Not(p Predicate) Predicate { return not{p} }

type and []Predicate

func (a and) Create(e CreateEvent) bool { return all(a, func(p Predicate) bool { return p.Create(e) }) }
func (a and) Update(e UpdateEvent) bool { return all(a, func(p Predicate) bool { return p.Update(e) }) }
func (a and) Delete(e DeleteEvent) bool { return all(a, func(p Predicate) bool { return p.Delete(e) }) }
func (a and) Generic(e GenericEvent) bool {
	return all(a, func(p Predicate) bool { return p.Generic(e) })
}

type or []Predicate

func (o or) Create(e CreateEvent) bool {
	return anyOf(o, func(p Predicate) bool { return p.Create(e) })
}
func (o or) Update(e UpdateEvent) bool {
	return anyOf(o, func(p Predicate) bool { return p.Update(e) })
}
func (o or) Delete(e DeleteEvent) bool {
	return anyOf(o, func(p Predicate) bool { return p.Delete(e) })
}
func (o or) Generic(e GenericEvent) bool {
	return anyOf(o, func(p Predicate) bool { return p.Generic(e) })
}

type not struct{ p Predicate }

func (n not) Create(e CreateEvent) bool   { return n.p != nil && !n.p.Create(e) }
func (n not) Update(e UpdateEvent) bool   { return n.p != nil && !n.p.Update(e) }
func (n not) Delete(e DeleteEvent) bool   { return n.p != nil && !n.p.Delete(e) }
func (n not) Generic(e GenericEvent) bool { return n.p != nil && !n.p.Generic(e) }

func compact(ps []Predicate) []Predicate {
	out := make([]Predicate, 0, len(ps))
	for _, p := range ps {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

func all(ps []Predicate, f func(Predicate) bool) bool {
	for _, p := range ps {
		if !f(p) {
			return false
		}
	}
	return true
}

func anyOf(ps []Predicate, f func(Predicate) bool) bool {
	for _, p := range ps {
		if f(p) {
			return true
		}
	}
	return false
}
