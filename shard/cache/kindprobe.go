package cache

import (
	"context"
	"fmt"

	"github.com/kshard/kshard/internal/cache/shardprobe"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// probeKind asks the API server whether it filters the resource of mapping
// by shard selector (shardprobe.Filtering), in the cache's namespace,
// retrying while the server is unreachable. A probe that fails otherwise
// (forbidden, a refused selector) reads as not filtered, with the error as
// its reason.
func (c *Cache) probeKind(ctx context.Context, mapping *meta.RESTMapping) shardprobe.Result {
	dc, err := dynamic.NewForConfigAndClient(c.config, c.httpClient)
	if err == nil {
		ns, _ := c.namespaceFor(mapping)
		var probe shardprobe.Result
		// Patient like the informers: a replica started while the API
		// server is unreachable must not settle for the fallback.
		probe, err = retryUnreachable(ctx, c.clock, func() (shardprobe.Result, error) {
			return shardprobe.Filtering(ctx, dc, mapping.Resource, ns, c.sharding.Partitioner)
		})
		if err == nil {
			return probe
		}
	}
	return shardprobe.Result{Reason: fmt.Sprintf("probing the API server's sharded list failed (%v); listing the whole kind and filtering on the client", err)}
}

// probeServer asks the API server whether it filters the kind of mapping
// by a shard selector: ModeSharded when it does, ModeFallback with the
// reason when not (to be probed again at the kind's first object when it
// had none to test with).
func (c *Cache) probeServer(ctx context.Context, mapping *meta.RESTMapping) KindMode {
	return modeOfProbe(c.probeKind(ctx, mapping))
}

// modeOfProbe is the cache mode a probe calls for.
func modeOfProbe(p shardprobe.Result) KindMode {
	if p.Filtered {
		return KindMode{Mode: ModeSharded}
	}
	return KindMode{Mode: ModeFallback, Reason: p.Reason, reprobe: p.Retry}
}

// reprobeFor returns, for a kind in fallback only because its probe could
// not decide (no object to test with), what its Segmented calls once it
// caches an object (segmented.Options.Reprobe): the probe again, whose mode
// becomes the kind's in ModeReport (and so in kshard_cache_mode and
// /readyz?verbose) before the Segmented acts on it. Nil for any other mode:
// those are final.
func (c *Cache) reprobeFor(gvk schema.GroupVersionKind, mapping *meta.RESTMapping, mode KindMode) func(context.Context) shardprobe.Result {
	if !mode.reprobe {
		return nil
	}
	return func(ctx context.Context) shardprobe.Result {
		probe := c.probeKind(ctx, mapping)
		if ctx.Err() != nil {
			return probe // stopping: the probe failed for that alone
		}
		m := modeOfProbe(probe)
		c.mu.Lock()
		// The entry is published before its Segmented runs, and only a
		// running Segmented calls this.
		if e, ok := c.informers[informerKey{gvk: gvk}]; ok {
			e.reprobed.Store(&m)
		}
		c.mu.Unlock()
		c.sharding.Logger.Info("probed a kind again at its first object", "kind", gvk.String(), "mode", m.Mode, "reason", m.Reason)
		return probe
	}
}

// currentMode is how e's kind is cached now: the first decision, or the
// one a probe at its first object made since (reprobeFor).
func (e *entry) currentMode() KindMode {
	if m := e.reprobed.Load(); m != nil {
		return *m
	}
	return e.mode
}
