package assign

import (
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/kshard/kshard/shard"
)

// Bounded load: no member owns more than ceil(load × P / N), for every ring
// size a deployment is likely to run.
func TestBalanceIsBounded(t *testing.T) {
	for _, tc := range []struct {
		cfg     shard.Config
		namings []string
	}{
		{shard.Config{}, namingSamples[:2]},
		{shard.Config{Partitions: 1021}, namingSamples[:1]},
		{shard.Config{Load: 1.1}, namingSamples[:1]},
	} {
		cfg := tc.cfg.WithDefaults()
		worst := 0.0
		for _, prefix := range tc.namings {
			for n := 1; n <= 64; n++ {
				r := mustRing(t, cfg, statefulSetNames(prefix, n))
				bound := int(math.Ceil(cfg.Load * float64(cfg.Partitions) / float64(n)))
				most := 0
				for _, m := range r.Members() {
					most = max(most, r.Partitions(m).Len())
				}
				if most > bound {
					t.Fatalf("%+v N=%d %s: a member owns %d partitions, bound %d", cfg, n, prefix, most, bound)
				}
				worst = max(worst, float64(most)/(float64(cfg.Partitions)/float64(n)))
			}
		}
		t.Logf("P=%d load=%g: busiest member owns at most %.2f× the mean (N=1..64)", cfg.Partitions, cfg.Load, worst)
	}
}

// movement is how many partitions change owner relative to the ideal
// (the partitions the joining member should take, or the leaving one held).
type movement struct {
	upAvg, upWorst     float64 // N → N+1: a replica with the next ordinal joins
	downAvg, downWorst float64 // N → N−1: a random replica leaves
}

func measureMovement(t testing.TB, cfg shard.Config, prefixes []string, maxN int) movement {
	cfg = cfg.WithDefaults()
	p := float64(cfg.Partitions)
	rng := rand.New(rand.NewPCG(17, 19))
	var m movement
	steps := 0
	for _, prefix := range prefixes {
		rings := make([]*Ring, maxN+2)
		for n := 1; n <= maxN+1; n++ {
			rings[n] = mustRing(t, cfg, statefulSetNames(prefix, n))
		}
		for n := 2; n <= maxN; n++ {
			up := float64(movedPartitions(rings[n], rings[n+1])) / (p / float64(n+1))

			members := statefulSetNames(prefix, n)
			leaver := rng.IntN(n)
			fewer := mustRing(t, cfg, slices.Delete(members, leaver, leaver+1))
			down := float64(movedPartitions(rings[n], fewer)) / (p / float64(n))

			m.upAvg += up
			m.downAvg += down
			m.upWorst = max(m.upWorst, up)
			m.downWorst = max(m.downWorst, down)
			steps++
		}
	}
	m.upAvg /= float64(steps)
	m.downAvg /= float64(steps)
	return m
}

// Scaling by one replica should move close to the ideal number of
// partitions. Bounded loads move some extra: when the mean changes, members
// that were at the bound pass partitions on. The bounds asserted here are
// what the defaults measure (TestSweepReplicationFactor), with a little
// headroom.
func TestMovementOnScaleIsNearIdeal(t *testing.T) {
	m := measureMovement(t, shard.Config{}, namingSamples, 32)
	t.Logf("P=271 N=2..32, %d namings: join avg %.3f× worst %.2f×; leave avg %.3f× worst %.2f×",
		len(namingSamples), m.upAvg, m.upWorst, m.downAvg, m.downWorst)
	if m.upAvg > 1.25 || m.downAvg > 1.25 {
		t.Errorf("average movement %.3f× (join) / %.3f× (leave) of ideal, want ≤ 1.25×", m.upAvg, m.downAvg)
	}
	if m.upWorst > 2.5 || m.downWorst > 2.5 {
		t.Errorf("worst movement %.2f× (join) / %.2f× (leave) of ideal, want ≤ 2.5×", m.upWorst, m.downWorst)
	}
}

// TestSweepReplicationFactor reruns the measurement behind
// DefaultReplicationFactor. It takes about 15 s, so it is opt-in:
//
//	KSHARD_SWEEP=1 go test -run TestSweepReplicationFactor -v ./internal/assign/
func TestSweepReplicationFactor(t *testing.T) {
	if os.Getenv("KSHARD_SWEEP") == "" {
		t.Skip("set KSHARD_SWEEP=1 to rerun the sweep behind DefaultReplicationFactor")
	}
	for _, p := range []int{271, 1021} {
		for _, rf := range []int{10, 20, 30, 40, 64, 100, 160} {
			cfg := shard.Config{Partitions: p, ReplicationFactor: rf}
			start := time.Now()
			m := measureMovement(t, cfg, namingSamples, 32)
			buildStart := time.Now()
			mustRing(t, cfg, statefulSetNames("kshard", 32))
			build := time.Since(buildStart)
			t.Logf("P=%4d RF=%3d  join avg %.3f worst %.2f  leave avg %.3f worst %.2f  build(N=32) %v  (sweep %v)",
				p, rf, m.upAvg, m.upWorst, m.downAvg, m.downWorst, build.Round(time.Microsecond), time.Since(start).Round(time.Millisecond))
		}
	}
}

// TestSweepLoad reruns the measurement behind the advice on Load
// (docs/configuration.md):
// how much more than the mean the busiest member owns (it caps the fleet's
// throughput, and with the sharded cache its memory), against how many
// partitions move when one replica joins or leaves. Opt-in, like
// TestSweepReplicationFactor:
//
//	KSHARD_SWEEP=1 go test -run TestSweepLoad -v ./internal/assign/
func TestSweepLoad(t *testing.T) {
	if os.Getenv("KSHARD_SWEEP") == "" {
		t.Skip("set KSHARD_SWEEP=1 to rerun the sweep behind the advice on Load")
	}
	for _, p := range []int{271, 1021} {
		for _, load := range []float64{1.02, 1.05, 1.1, 1.15, 1.25} {
			cfg := shard.Config{Partitions: p, Load: load}.WithDefaults()
			var sum, worst float64
			rings := 0
			for _, prefix := range namingSamples {
				for n := 2; n <= 32; n++ {
					r := mustRing(t, cfg, statefulSetNames(prefix, n))
					most := 0
					for _, m := range r.Members() {
						most = max(most, r.Partitions(m).Len())
					}
					busiest := float64(most) / (float64(p) / float64(n))
					sum += busiest
					worst = max(worst, busiest)
					rings++
				}
			}
			m := measureMovement(t, cfg, namingSamples, 32)
			t.Logf("P=%4d load=%.2f  busiest ÷ mean avg %.3f worst %.3f  join avg %.3f worst %.2f  leave avg %.3f worst %.2f",
				p, load, sum/float64(rings), worst, m.upAvg, m.upWorst, m.downAvg, m.downWorst)
		}
	}
}
