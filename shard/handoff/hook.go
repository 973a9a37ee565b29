package handoff

import "github.com/kshard/kshard/internal/handoffhook"

// The simulation's hooks (internal/handoffhook): operations on a Core that
// only internal/handoffsim uses, kept out of the API.
func init() {
	handoffhook.Register(handoffhook.Hooks[*Core]{
		SetRingBuilder: func(c *Core, build handoffhook.RingBuilder) {
			if build != nil {
				c.placement.build = build
			}
		},
		SetTrustWatchOrder: func(c *Core, trust bool) { c.peers.trustWatchOrder = trust },
		Proven: func(c *Core, podUID, incarnation string) bool {
			return c.deaths[Death{PodUID: podUID, Incarnation: incarnation}]
		},
		Tombstones: func(c *Core) []handoffhook.Tombstone {
			var out []handoffhook.Tombstone
			for _, o := range c.peers.tombstones() {
				out = append(out, handoffhook.Tombstone{Identity: o.Identity, Incarnation: o.Incarnation})
			}
			return out
		},
	})
}
