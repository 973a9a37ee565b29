package handoff

import "github.com/kshard/kshard/shard"

// The timings and the validity the core decides by have their public home
// in package shard, where users configure them; the core names them here.
type (
	Timing      = shard.Timing
	TimingNames = shard.TimingNames
	Validity    = shard.Validity
)

const (
	DefaultLeaseDuration           = shard.DefaultLeaseDuration
	DefaultDrainGracePeriod        = shard.DefaultDrainGracePeriod
	DefaultGracefulShutdownTimeout = shard.DefaultGracefulShutdownTimeout
	DefaultEmbeddedShutdownTimeout = shard.DefaultEmbeddedShutdownTimeout
)

var ErrTiming = shard.ErrTiming
