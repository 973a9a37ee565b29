package kshardtest

import "time"

// LivenessAllowance is the part of the default liveness bound
// (Options.LivenessBound) that is neither the Lease nor the drain: a new
// owner's Lease writes and watch round trips, its cache's LISTs (and, with
// CacheMode labels, its label patches), the activation's replay and the
// reconcile itself, on a loaded 2-core CI machine under -race, where every
// replica is a process built with the race detector. kshard's chaos suite
// measured the waits this must cover (docs/testing.md, "Liveness and caches").
const LivenessAllowance = 20 * time.Second

// client-go's reflectors retry a failed LIST or watch after an
// exponential backoff (800ms, doubling, capped at 30s) with up to 100%
// jitter (k8s.io/client-go/tools/cache/reflector.go).
const (
	reflectorBackoffInit = 800 * time.Millisecond
	reflectorBackoffMax  = 30 * time.Second
)

// InformerRecovery bounds how long after an API server outage of the given
// length an informer may still wait before its next LIST: the backoff step
// in progress when the server came back. Steps double from 800ms, so the
// step in progress is at most the outage plus the first step, and jitter
// doubles it; client-go caps the step at 30s, 60s with jitter. An outage's
// fault (Env.StopAPIServer, recorder.Writer.Fault) ends this long after the
// server came back.
func InformerRecovery(outage time.Duration) time.Duration {
	return 2 * min(outage+reflectorBackoffInit, reflectorBackoffMax)
}
