package handoff

import "github.com/kshard/kshard/internal/handoffhook"

// attach gives the core the simulation's hooks (internal/handoffhook): its
// ring builder, and reads of the core's proofs and tombstones for the
// oracle. Only handoff.New calls it, with what kshard's simulations pass.
func (c *Core) attach(h *handoffhook.Hooks) {
	if h.RingBuilder != nil {
		c.placement.build = h.RingBuilder
	}
	h.Proven = func(podUID, incarnation string) bool {
		return c.deaths[Death{PodUID: podUID, Incarnation: incarnation}]
	}
	h.Tombstones = func() []handoffhook.Tombstone {
		var out []handoffhook.Tombstone
		for _, o := range c.peers.tombstones() {
			out = append(out, handoffhook.Tombstone{Identity: o.Identity, Incarnation: o.Incarnation})
		}
		return out
	}
}
