package kshardtest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/kshard/kshard/internal/recorder"
	"github.com/kshard/kshard/internal/testwait"
	"github.com/kshard/kshard/manager/kshardtest"
	"github.com/kshard/kshard/manager/kshardtest/internal/tinyoperator"
	"github.com/kshard/kshard/shard/ringstatus"
)

const tinyReplica = "github.com/kshard/kshard/manager/kshardtest/internal/tinyreplica"

var identities = []string{"r-0", "r-1", "r-2"}

// fleet starts r-0 and r-1 in this process and r-2 as a process, so both
// ways of running a replica are exercised.
func fleet(t *testing.T, env *kshardtest.Env) (start func(identity string)) {
	bin := kshardtest.Build(t, tinyReplica)
	return func(identity string) {
		if identity == "r-2" {
			env.StartProcess(identity, kshardtest.Command{Path: bin})
			return
		}
		env.StartInProcess(identity, tinyoperator.Run)
	}
}

// assertClean fails the test unless the checker found no overlap and no
// lost update in a run that did reconcile the writer's updates.
func assertClean(t *testing.T, env *kshardtest.Env, w *kshardtest.Writer) {
	t.Helper()
	writes, failures, lastErr := w.Stop()
	report := env.Check(time.Minute)
	t.Logf("writer: %d updates acknowledged, %d failed (last: %v); checker: %s", writes, failures, lastErr, report)
	if !report.OK() {
		t.Fatalf("the checker found problems:\n%s", report)
	}
	if writes == 0 || report.Completed == 0 {
		t.Fatalf("nothing was exercised: %d updates, %d completed reconciles", writes, report.Completed)
	}
}

func TestRollingRestart(t *testing.T) {
	env := kshardtest.New(t, kshardtest.Options{})
	start := fleet(t, env)
	for _, id := range identities {
		start(id)
	}
	env.AwaitConverged(2*time.Minute, identities...)
	w := env.StartWriter(env.CreateConfigMaps(40), 40)

	env.RollingRestart(2*time.Minute, start, identities...)

	assertClean(t, env, w)
	if r, err := recorder.Load(env.RecordDir()); err != nil {
		t.Fatal(err)
	} else if got := len(r.Processes()); got != 2*len(identities) {
		t.Fatalf("records name %d replica runs, want %d (each identity twice): %v", got, 2*len(identities), r.Processes())
	}
}

// With KeepPlaceOnLeave a rolling restart moves no partition to another
// identity: each waits for its replica's next incarnation. Nothing is
// reconciled twice at once or lost, as in TestRollingRestart.
func TestRollingRestartKeepingPlaces(t *testing.T) {
	env := kshardtest.New(t, kshardtest.Options{KeepPlaceOnLeave: true})
	start := fleet(t, env)
	for _, id := range identities {
		start(id)
	}
	env.AwaitConverged(2*time.Minute, identities...)
	w := env.StartWriter(env.CreateConfigMaps(40), 40)
	converged := time.Now().UnixNano()

	env.RollingRestart(2*time.Minute, start, identities...)

	assertClean(t, env, w)
	log, err := recorder.Load(env.RecordDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range log.Moves(converged) {
		t.Errorf("partition %d moved to another replica during the rolling restart: %s; want it kept for its replica's next process", m.Partition, m)
	}
	again := 0
	for _, windows := range log.Windows() {
		for _, win := range windows {
			if win.Start >= converged {
				again++
			}
		}
	}
	if again == 0 {
		t.Fatal("no partition was activated during the rolling restart: it was not exercised")
	}
	t.Logf("partitions activated again during the rolling restart: %d, none by another replica", again)
}

// rejoin resumes identity, paused, and waits until it is back in the ring
// or has exited (fenced with partitions still draining past its stop
// deadline, which a pause longer than that always leaves), and then
// restarts it as a kubelet would. Right after its resume the replica may
// renew its old Record once before it fences, and its peers may hand its
// partitions back to it: the Leases then read as converged although the
// replica is about to exit. Only a Record newer than the one it froze with
// shows that it got past the fence.
func rejoin(t *testing.T, env *kshardtest.Env, start func(string), identity string) {
	t.Helper()
	frozenWith := generation(env.Ring(), identity)
	env.Resume(identity)
	exited := false
	// Every 100ms: each check lists the Leases.
	testwait.NoError(t, 100*time.Millisecond, time.Minute, identity+" to rejoin or exit after its resume", func() error {
		if env.Exited(identity) {
			exited = true
			return nil
		}
		ring := env.Ring()
		if err := ring.Converged(identities...); err != nil {
			return err
		}
		if g := generation(ring, identity); g <= frozenWith {
			return fmt.Errorf("%s's Record is at generation %d, not past the %d it froze with", identity, g, frozenWith)
		}
		return nil
	})
	if exited {
		t.Logf("%s exited after its pause; restarting it", identity)
		start(identity)
	}
}

// generation is the generation of the Record identity's Lease carries, 0
// without one.
func generation(ring ringstatus.Ring, identity string) uint64 {
	for _, m := range ring.Members {
		if m.Identity == identity {
			return m.Generation
		}
	}
	return 0
}

// TestFaults runs every fault the kit injects, each on a replica of the
// kind it applies to differently, under a steady stream of updates.
func TestFaults(t *testing.T) {
	env := kshardtest.New(t, kshardtest.Options{})
	start := fleet(t, env)
	for _, id := range identities {
		start(id)
	}
	const converge = 2 * time.Minute
	env.AwaitConverged(converge, identities...)
	w := env.StartWriter(env.CreateConfigMaps(40), 40)

	t.Log("crash r-0 (in this process): the others take its partitions once its Leases expire")
	env.Crash("r-0")
	env.AwaitConverged(converge, "r-1", "r-2")
	start("r-0")
	env.AwaitConverged(converge, identities...)

	t.Log("pause r-2 (a process, SIGSTOP) until the others have taken over, then resume it")
	env.Pause("r-2")
	env.AwaitConverged(converge, "r-0", "r-1")
	rejoin(t, env, start, "r-2")
	env.AwaitConverged(converge, identities...)

	t.Log("pause r-1 (in this process: its requests hang) until the others have taken over")
	env.Pause("r-1")
	env.AwaitConverged(converge, "r-0", "r-2")
	env.Resume("r-1")
	env.AwaitConverged(converge, identities...)

	t.Log("API-server outage longer than the renew deadline: every replica fences")
	env.StopAPIServer()
	// The outage's length is the fault itself, not a wait for a condition.
	time.Sleep(env.Options().RenewDeadline + time.Second)
	env.StartAPIServer()
	env.AwaitConverged(converge, identities...)

	assertClean(t, env, w)
}
