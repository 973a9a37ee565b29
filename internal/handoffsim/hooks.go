package handoffsim

import (
	"github.com/kshard/kshard/internal/handoffhook"
	"github.com/kshard/kshard/shard/handoff"
)

// coreHooks are handoff.Core's simulation-only operations: a ring builder
// shared by a seed's cores, the stale-view defence's switch, and the
// oracle's reads of proofs and tombstones. handoff registers them in its
// init, which runs before this package's variables are initialised
// (TestCoreHooksRegistered).
var coreHooks, _ = handoffhook.For[*handoff.Core]()

// NewCore returns a core for the process, as an external Shell must build
// it: from Config, with the seed's shared ring builder.
func (p *proc) NewCore() (*handoff.Core, error) {
	core, err := handoff.New(p.Config())
	if err != nil {
		return nil, err
	}
	coreHooks.SetRingBuilder(core, p.w.ring)
	return core, nil
}
