package cache

import (
	"time"

	"github.com/kshard/kshard/internal/cache/labelled"
)

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
type CheckReport struct {
	// Checks counts the checks completed; Failed those whose LIST failed
	// (the next check compares with the last completed one).
	Checks, Failed int64
	// Missing is how many objects the last check found missing from the
	// cache: they exist on the API server in partitions it holds and
	// reports synced, unchanged for at least an interval. Examples names
	// up to 5 of them (namespace/name).
	Missing  int
	Examples []string
	// Relists counts the relists of the views that held too little,
	// started once each time a check finds objects missing after one
	// that found none.
	Relists int64
	// Checked is how many objects the last check compared, Requests how
	// many LISTs it sent, Took how long it took; At is when it ended.
	Checked, Requests int
	Took              time.Duration
	At                time.Time
}

// checkReportOf is the public copy of a labelled cache's report; nil when
// its check is off. A type of its own here, so that the promise of this
// package's API is recorded field by field (api/kshard.txt).
func checkReportOf(r *labelled.CheckReport) *CheckReport {
	if r == nil {
		return nil
	}
	return &CheckReport{
		Checks: r.Checks, Failed: r.Failed, Missing: r.Missing, Examples: r.Examples, Relists: r.Relists,
		Checked: r.Checked, Requests: r.Requests, Took: r.Took, At: r.At,
	}
}
