package manager

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/manager/cache/cachemetrics"
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

// cacheStatusPeriod is how often a replica counts its cached objects for its
// Lease. The count rides on the next renewal (lease.Member.SetCacheStatus),
// so the period costs a walk of the stores, never a write; a scrape within
// cachemetrics.CountsMaxAge shares the walk.
const cacheStatusPeriod = cachemetrics.CountsMaxAge

// publishCacheStatus hands the lease member this replica's cache mode and
// the number of objects its cache holds, every cacheStatusPeriod until ctx
// ends, for `kshard status`.
func (m *Manager) publishCacheStatus(ctx context.Context) error {
	t := time.NewTicker(cacheStatusPeriod)
	defer t.Stop()
	for {
		total := 0
		for _, n := range m.cacheCounts.ObjectCounts() {
			total += n
		}
		m.member.SetCacheStatus(lease.CacheStatus{Mode: string(m.opts.CacheMode), Objects: total})
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
