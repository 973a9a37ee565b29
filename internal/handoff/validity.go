package handoff

import (
	"time"

	"github.com/kshard/kshard/shard"
)

// validityState is the validity as of the last step, with the inputs it
// was computed from, which the next step compares against.
type validityState struct {
	shard.Validity
	sent time.Time // the sending time of the renewal Until counts from; zero: none yet
	lost bool      // fenced or done
}

// nextValidity is the validity after a step that saw the last successful
// renewal sent at sent (zero: none yet) and the replica lost (fenced or
// done), given the previous step's.
func nextValidity(prev validityState, sent time.Time, lost bool, renewDeadline time.Duration) validityState {
	next := validityState{Validity: shard.Validity{Epoch: prev.Epoch}, sent: sent, lost: lost}
	lapsed := !prev.sent.IsZero() && !sent.Before(prev.sent.Add(renewDeadline))
	// A fence before any validity starts no epoch: the zero Validity must
	// keep meaning "never valid" (Validity.EverHeld), which lets
	// the client transport pass the writes of a replica still starting.
	if lost && !prev.lost && prev.EverHeld() || lapsed {
		next.Epoch++
	}
	if !lost && !sent.IsZero() {
		next.Until = sent.Add(renewDeadline)
	}
	return next
}
