package main

import (
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/kshard/kshard/internal/recorder"
)

// TestConvertedOperatorHandsOff runs three replicas of the converted
// operator (built with -tags kshardtest, which records its reconciles and
// ring events) on a real control plane under a stream of updates, through
// a graceful rolling restart and one SIGKILL, and checks with the kit's
// checker that no key was reconciled by two replicas at once and that every
// update was reconciled.
func TestConvertedOperatorHandsOff(t *testing.T) {
	began := time.Now()
	ids := []string{"r-0", "r-1", "r-2"}
	f := newFleet(t, "crshardop", ".", false, ids...)
	f.env.RollingRestart(2*time.Minute, f.start, ids...)
	f.env.Crash("r-1")
	f.env.AwaitConverged(time.Minute, "r-0", "r-2")
	f.start("r-1")
	f.env.AwaitConverged(2*time.Minute, ids...)
	f.check(t, "rolling restart and a kill", ids)
	t.Logf("took %s", time.Since(began).Round(time.Second))
	log, err := recorder.Load(f.env.RecordDir())
	if err != nil {
		t.Fatal(err)
	}
	gaps := log.Handoffs()
	if len(gaps) == 0 {
		t.Fatal("no partition moved between replicas: the restarts handed nothing off")
	}
	slices.Sort(gaps)
	// Moves off the killed replica wait out its Lease (LeaseDuration);
	// graceful ones wait only for a drain and a watch round-trip.
	slow := len(gaps) - sort.Search(len(gaps), func(i int) bool { return gaps[i] >= time.Second })
	t.Logf("%d partition moves; time active nowhere: p50 %s, max %s; %d moves of 1s or more (the SIGKILL's, which peers wait out)",
		len(gaps), gaps[len(gaps)/2], gaps[len(gaps)-1], slow)
}
