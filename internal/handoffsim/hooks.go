package handoffsim

import (
	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/internal/handoffhook"
)

// NewCore returns a core for the process, as an external Shell must build
// it: from Config, with the simulation's hooks (internal/handoffhook): the
// seed's shared ring builder, and the oracle's reads of the core's proofs
// and tombstones.
func (p *proc) NewCore() (*handoff.Core, error) {
	h := &handoffhook.Hooks{RingBuilder: p.w.ring}
	core, err := handoff.New(p.Config(), h)
	if err != nil {
		return nil, err
	}
	if p.coreHooks == nil {
		p.coreHooks = map[*handoff.Core]*handoffhook.Hooks{}
	}
	p.coreHooks[core] = h
	return core, nil
}

// hooks returns the hooks of the process's core; nil if NewCore did not
// build it.
func (p *proc) hooks() *handoffhook.Hooks { return p.coreHooks[p.core] }
