package controllertest

import (
	"context"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kshard/kshard/controller"
)

// Manager is a controller.Manager double. Set its fields, build controllers
// against it, then Start it (or start what Runnables returns yourself).
type Manager struct {
	Scheme            *runtime.Scheme
	Mapper            meta.RESTMapper
	Cache             *Informers
	Logger            logr.Logger
	ControllerOptions controller.Options

	mu        sync.Mutex
	runnables []controller.Runnable
}

var _ controller.Manager = &Manager{}

func (m *Manager) GetInformers() controller.Informers {
	if m.Cache == nil {
		return nil // a typed nil *Informers would look non-nil
	}
	return m.Cache
}

func (m *Manager) GetScheme() *runtime.Scheme               { return m.Scheme }
func (m *Manager) GetRESTMapper() meta.RESTMapper           { return m.Mapper }
func (m *Manager) GetLogger() logr.Logger                   { return m.Logger }
func (m *Manager) GetControllerOptions() controller.Options { return m.ControllerOptions }

// Add records r.
func (m *Manager) Add(r controller.Runnable) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runnables = append(m.runnables, r)
	return nil
}

// Runnables returns what was added, in order.
func (m *Manager) Runnables() []controller.Runnable {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]controller.Runnable(nil), m.runnables...)
}

// Controllers returns the added runnables that are controllers: what a
// sharding manager activates and revokes partitions on.
func (m *Manager) Controllers() []controller.Controller {
	var cs []controller.Controller
	for _, r := range m.Runnables() {
		if c, ok := r.(controller.Controller); ok {
			cs = append(cs, c)
		}
	}
	return cs
}

// Start runs the cache and every runnable until ctx ends, waits for all of
// them, and returns the first runnable error.
func (m *Manager) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(m.Runnables())+1)
	if m.Cache != nil {
		wg.Go(func() { errs <- m.Cache.Start(ctx) })
	}
	for _, r := range m.Runnables() {
		wg.Go(func() { errs <- r.Start(ctx) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
