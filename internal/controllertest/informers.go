package controllertest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	"github.com/kshard/kshard/controller"
)

// Informers is an in-memory controller.Informers: one informer per kind,
// fed by a fake list/watch that the test drives with Add, Update and Delete.
type Informers struct {
	scheme *runtime.Scheme

	// mu guards the fields below.
	mu      sync.Mutex
	kinds   map[schema.GroupVersionKind]*fakeKind
	runCtx  context.Context
	stopped bool
	running sync.WaitGroup
}

type fakeKind struct {
	source   *fcache.FakeControllerSource
	informer toolscache.SharedIndexInformer
}

// listWatch wraps the fake source and declares that it does not support
// watch-list (client-go otherwise tries it first).
type listWatch struct{ *fcache.FakeControllerSource }

func (listWatch) IsWatchListSemanticsUnSupported() bool { return true }

// NewInformers returns Informers resolving kinds with scheme.
func NewInformers(scheme *runtime.Scheme) *Informers {
	return &Informers{scheme: scheme, kinds: map[schema.GroupVersionKind]*fakeKind{}}
}

// Informer returns the informer of obj's kind, creating it on first use; it
// starts at once if Start is running.
func (i *Informers) Informer(_ context.Context, obj controller.Object) (controller.Informer, error) {
	k, err := i.kind(obj)
	if err != nil {
		return nil, err
	}
	return k.informer, nil
}

// Add adds obj (a copy) to its kind's fake API, delivering an add event.
func (i *Informers) Add(obj controller.Object) error {
	k, err := i.kind(obj)
	if err != nil {
		return err
	}
	k.source.Add(obj.DeepCopyObject())
	return nil
}

// Update replaces obj (same namespace, name and UID), delivering an update.
func (i *Informers) Update(obj controller.Object) error {
	k, err := i.kind(obj)
	if err != nil {
		return err
	}
	k.source.Modify(obj.DeepCopyObject())
	return nil
}

// Delete removes obj, delivering a delete event.
func (i *Informers) Delete(obj controller.Object) error {
	k, err := i.kind(obj)
	if err != nil {
		return err
	}
	k.source.Delete(obj.DeepCopyObject())
	return nil
}

// Start runs every informer, present and future, until ctx ends, then
// waits for them.
func (i *Informers) Start(ctx context.Context) error {
	i.mu.Lock()
	if i.runCtx != nil {
		i.mu.Unlock()
		return errors.New("controllertest: Informers started twice")
	}
	i.runCtx = ctx
	for _, k := range i.kinds {
		i.runLocked(k)
	}
	i.mu.Unlock()
	<-ctx.Done()
	i.mu.Lock()
	i.stopped = true
	i.mu.Unlock()
	i.running.Wait()
	return nil
}

// WaitForCacheSync waits for every informer created so far to sync.
func (i *Informers) WaitForCacheSync(ctx context.Context) bool {
	i.mu.Lock()
	var infs []toolscache.SharedIndexInformer
	for _, k := range i.kinds {
		infs = append(infs, k.informer)
	}
	i.mu.Unlock()
	for _, inf := range infs {
		select {
		case <-inf.HasSyncedChecker().Done():
		case <-ctx.Done():
			return false
		}
	}
	return true
}

func (i *Informers) runLocked(k *fakeKind) {
	ctx := i.runCtx
	i.running.Go(func() { k.informer.RunWithContext(ctx) })
}

func (i *Informers) kind(obj controller.Object) (*fakeKind, error) {
	gvk, err := i.gvkOf(obj)
	if err != nil {
		return nil, err
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if k, ok := i.kinds[gvk]; ok {
		return k, nil
	}
	if i.stopped {
		return nil, fmt.Errorf("controllertest: informers stopped; cannot create one for %s", gvk)
	}
	example := runtime.Object(&metav1.PartialObjectMetadata{})
	if _, ok := obj.(*metav1.PartialObjectMetadata); !ok {
		if example, err = i.scheme.New(gvk); err != nil {
			return nil, err
		}
	}
	src := fcache.NewFakeControllerSource()
	k := &fakeKind{
		source: src,
		informer: toolscache.NewSharedIndexInformer(listWatch{src}, example, 0,
			toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}),
	}
	i.kinds[gvk] = k
	if i.runCtx != nil {
		i.runLocked(k)
	}
	return k, nil
}

func (i *Informers) gvkOf(obj controller.Object) (schema.GroupVersionKind, error) {
	if obj == nil {
		return schema.GroupVersionKind{}, errors.New("controllertest: object is nil")
	}
	if pom, ok := obj.(*metav1.PartialObjectMetadata); ok {
		gvk := pom.GroupVersionKind()
		if gvk.Kind == "" {
			return gvk, errors.New("controllertest: *metav1.PartialObjectMetadata without TypeMeta")
		}
		return gvk, nil
	}
	gvks, _, err := i.scheme.ObjectKinds(obj)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("controllertest: %T is not in the scheme: %w", obj, err)
	}
	return gvks[0], nil
}
