package manager

import (
	"context"
	"fmt"
	"strings"

	"github.com/kshard/kshard/lease"
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

// publishCacheStatus hands the lease member this replica's cache mode and
// the number of objects its cache holds until ctx ends, for `kshard status`.
func (m *Manager) publishCacheStatus(ctx context.Context) error {
	m.cacheCounts.PublishTotal(ctx, func(objects int) {
		m.member.SetCacheStatus(lease.CacheStatus{Mode: string(m.opts.CacheMode), Objects: objects})
	})
	return nil
}
