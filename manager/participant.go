package manager

import (
	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/shard/ring"
)

// Sharded is implemented by Runnables that take part in partition handoff,
// as controllers do: the ring coordinator's participant contract
// (ring.Participant). Admit is called on the coordinator's loop, which must
// keep time for fencing: start work there, do not do it (a controller's
// cache replay, for one, runs in Replay, off the loop). Revoke returns only
// once nothing of the revoked partitions runs; fence asks for it at once.
type Sharded = ring.Participant

// Controllers are driven by the ring coordinator as they are.
var _ Sharded = controller.Controller(nil)
