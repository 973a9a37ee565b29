//go:build !mutant_renewlapse

package handoff

import "time"

// lapse reports whether a renew sent at sent, which has succeeded, came
// only after the renew deadline of the previous one sent at prev had
// passed: the process was paused or cut off in between, so peers may have
// voided its claims, and it fences even though the renew makes it look
// recently renewed (fencing.succeeded). lapse_mutant.go, built only with
// the tag mutant_renewlapse, never sees a lapse, to show that the
// simulation catches it.
func lapse(prev, sent time.Time, renewDeadline time.Duration) bool {
	return !sent.Before(prev.Add(renewDeadline))
}
