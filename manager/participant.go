package manager

import (
	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/shard/ring"
)

// Runnables that take part in partition handoff, as controllers do,
// implement the ring coordinator's participant contract (ring.Participant;
// Manager.Add). Admit is called on the coordinator's loop, which must keep
// time for fencing: start work there, do not do it (a controller's cache
// replay, for one, runs in Replay, off the loop). Revoke returns only once
// nothing of the revoked partitions runs; fence asks for it at once.

// Controllers are driven by the ring coordinator as they are.
var _ ring.Participant = controller.Controller(nil)
