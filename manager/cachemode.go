package manager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/kshard/kshard/shard/cache"
)

// cacheModes is the /readyz?verbose line naming each kind's cache mode and,
// for a kind not sharded, why.
func (m *Manager) cacheModes() string {
	var parts []string
	for _, k := range m.cache.ModeReport() {
		s := fmt.Sprintf("%s %s", k.Kind.String(), k.Mode)
		if k.Reason != "" {
			s += " (" + k.Reason + ")"
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "no kind cached yet"
	}
	return strings.Join(parts, "; ")
}

// cachePartitions is the /readyz?verbose line counting, for each
// partitioned kind, the partitions it holds and has synced, and what its
// informers are doing: a partition the ring claims activates only once
// every such kind has synced it, so this line says which kind a replica
// that claims partitions and activates none waits for.
func (m *Manager) cachePartitions() string {
	var parts []string
	for _, k := range m.cache.ModeReport() {
		if k.Informers == "" {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s holds %d partitions, %d synced (%s)", k.Kind.String(), k.HeldPartitions, k.SyncedPartitions, k.Informers))
	}
	if len(parts) == 0 {
		return "no partitioned kind"
	}
	return strings.Join(parts, "; ")
}

// publishCacheStatus hands the lease member this replica's cache mode and
// the number of objects its cache holds until ctx ends, for `kshard status`.
func (m *Manager) publishCacheStatus(ctx context.Context) error {
	m.cacheCounts.PublishTotal(ctx, func(objects int) {
		m.member.SetCacheStatus(string(m.opts.CacheMode), objects)
	})
	return nil
}

// cacheComplete is the readiness check of a sharded cache's self-check: it
// fails while the last check of a kind cached by labels found objects of
// the partitions this replica holds and reports synced missing from the
// cache (cache.CheckReport), naming the kind, how many and a few of them.
// The cache has then listed the kind again; the check passes once a later
// check finds nothing missing.
func cacheComplete(modes func() []cache.KindMode) Checker {
	return func(*http.Request) error {
		var bad []string
		for _, k := range modes() {
			if r := k.SelfCheck; r != nil && r.Missing > 0 {
				bad = append(bad, fmt.Sprintf("%d objects of %s (%s) exist on the API server, unchanged for at least a check interval, in partitions this replica holds and reports synced, but not in its cache", r.Missing, k.Kind.String(), strings.Join(r.Examples, ", ")))
			}
		}
		if len(bad) == 0 {
			return nil
		}
		return errors.New(strings.Join(bad, "; ") + "; the cache lists the kind again; if the next check still finds them, restart the replica and report a bug (kshard_cache_missing_objects)")
	}
}
