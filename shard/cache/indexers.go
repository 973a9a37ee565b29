package cache

import (
	"fmt"
	"maps"

	toolscache "k8s.io/client-go/tools/cache"
)

// AddIndexers adds indexers to the informer of obj's kind (every view of a
// partitioned kind: segments and the unlabelled view), so that
// ListByIndex can read by them. A kind cached whole may get them at any
// time; a partitioned kind gets them when its informer is created, so add
// them before the kind is first read or watched. An index name already
// used is refused.
func (c *Cache) AddIndexers(obj Object, indexers toolscache.Indexers) error {
	key, err := c.keyOf(obj)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	have := c.indexers[key]
	for name := range indexers {
		if _, dup := have[name]; dup || name == toolscache.NamespaceIndex {
			return fmt.Errorf("cache: %s already has an index named %q; give each index its own name", key.gvk, name)
		}
	}
	if e, ok := c.informers[key]; ok {
		if e.part != nil {
			return fmt.Errorf("cache: indexers for %s added after its informer was created: a kind cached by partition (mode %s) gets its indexers when its informer is created; add them before the kind is first read or watched (IndexField in main or SetupWithManager)", key.gvk, e.mode.Mode)
		}
		if err := e.informer.AddIndexers(indexers); err != nil {
			return fmt.Errorf("cache: adding indexers to the %s informer: %w", key.gvk, err)
		}
	}
	merged := maps.Clone(have)
	if merged == nil {
		merged = toolscache.Indexers{}
	}
	maps.Copy(merged, indexers)
	c.indexers[key] = merged
	return nil
}

// indexersFor returns the indexers added for key so far (a map the caller
// may keep: AddIndexers replaces, never changes, it).
func (c *Cache) indexersFor(key informerKey) toolscache.Indexers {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.indexers[key]
}

// addMissingIndexersLocked gives a just-created informer the indexers added
// since it was built with had (AddIndexers racing its creation). Call with
// c.mu held, before the informer starts.
func (c *Cache) addMissingIndexersLocked(key informerKey, e *entry, had toolscache.Indexers) error {
	missing := toolscache.Indexers{}
	for name, f := range c.indexers[key] {
		if _, ok := had[name]; !ok {
			missing[name] = f
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if e.part != nil {
		return fmt.Errorf("cache: indexers for %s were added while its informer was being created; add them before the kind is first read or watched", key.gvk)
	}
	return e.informer.AddIndexers(missing)
}
