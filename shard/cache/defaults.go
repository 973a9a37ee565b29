package cache

import "github.com/kshard/kshard/internal/cache/labelled"

// Defaults of LabelSharding.
const (
	// DefaultCheckInterval is how often a kind cached by labels checks its
	// stores against the API server (LabelSharding.CheckInterval): one
	// paged metadata LIST of its share every 5 minutes costs little beside
	// the watches, and catches a missing object within two intervals.
	DefaultCheckInterval = labelled.DefaultCheckInterval
	// DefaultLabelQPS is how many label patches a replica sends per second
	// and kind at most (LabelSharding.QPS).
	DefaultLabelQPS = labelled.DefaultLabelQPS
)

// CheckReport is what a kind cached by labels found when it last checked
// that it holds every object of the partitions it reports synced
// (KindMode.SelfCheck, LabelSharding.CheckInterval).
type CheckReport = labelled.CheckReport
