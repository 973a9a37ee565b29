package assign

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
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
		{shard.Config{Load: 1.25}, namingSamples[:1]},
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

// A fleet works at the pace of its busiest replica, and most fleets are
// small: at the defaults, for every naming sample (and the identities of
// the issue-42 measurements), the busiest of 2–8 members owns at most
// 1.08× the mean (measured: 1.063×; 1.27× at the old default load 1.25),
// and the busiest of 4 at most 30 % of e2e/bench's 2,000 objects (measured
// 29.2 %, 33.2 % at 1.25), so 4 replicas can reach 3.3× one's throughput
// on every naming.
func TestSmallRingsAreBalanced(t *testing.T) {
	cfg := shard.Config{}.WithDefaults()
	worst := 0.0
	for _, prefix := range keyShareNamings {
		for n := 2; n <= 8; n++ {
			r := mustRing(t, cfg, statefulSetNames(prefix, n))
			x := float64(busiestPartitions(r)) / (float64(cfg.Partitions) / float64(n))
			if x > 1.08 {
				t.Errorf("%s-0..%d: the busiest member owns %.3f× the mean (%d of %d partitions), want ≤ 1.08×",
					prefix, n-1, x, busiestPartitions(r), cfg.Partitions)
			}
			worst = max(worst, x)
		}
	}
	s := measureKeyShare(t, cfg, keyShareNamings, benchKeyNames(2000), 4)
	t.Logf("N=2..8, %d namings: busiest ≤ %.3f× the mean; N=4: busiest holds %.1f %% of 2,000 keys on average, %.1f %% at worst",
		len(keyShareNamings), worst, 100*s.avg, 100*s.worst)
	if s.worst > 0.30 {
		t.Errorf("N=4: the busiest member holds %.1f %% of the bench's keys, want ≤ 30 %%", 100*s.worst)
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
// that were at the bound pass partitions on, and the tighter the bound the
// more. The bounds asserted here are what the defaults measure
// (TestSweepLoad: 1.65× on average, 3.9× at worst at load 1.05; 1.20× and
// 2.2× at 1.25), with a little headroom.
func TestMovementOnScaleIsNearIdeal(t *testing.T) {
	m := measureMovement(t, shard.Config{}, namingSamples, 32)
	t.Logf("P=271 N=2..32, %d namings: join avg %.3f× worst %.2f×; leave avg %.3f× worst %.2f×",
		len(namingSamples), m.upAvg, m.upWorst, m.downAvg, m.downWorst)
	if m.upAvg > 1.7 || m.downAvg > 1.7 {
		t.Errorf("average movement %.3f× (join) / %.3f× (leave) of ideal, want ≤ 1.7×", m.upAvg, m.downAvg)
	}
	if m.upWorst > 4 || m.downWorst > 4 {
		t.Errorf("worst movement %.2f× (join) / %.2f× (leave) of ideal, want ≤ 4×", m.upWorst, m.downWorst)
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

// balance is how much more than the mean the busiest member owns, as
// busiest ÷ (P/N), over rings of 2..maxN members and several namings.
type balance struct{ avg, worst float64 }

func measureBalance(t testing.TB, cfg shard.Config, prefixes []string, maxN int) balance {
	cfg = cfg.WithDefaults()
	var b balance
	rings := 0
	for _, prefix := range prefixes {
		for n := 2; n <= maxN; n++ {
			r := mustRing(t, cfg, statefulSetNames(prefix, n))
			x := float64(busiestPartitions(r)) / (float64(cfg.Partitions) / float64(n))
			b.avg += x
			b.worst = max(b.worst, x)
			rings++
		}
	}
	b.avg /= float64(rings)
	return b
}

// busiestPartitions is how many partitions r's busiest member owns.
func busiestPartitions(r *Ring) int {
	most := 0
	for _, m := range r.Members() {
		most = max(most, r.Partitions(m).Len())
	}
	return most
}

// benchKeyNames are the keys of the objects e2e/bench creates
// ("kshard-bench/obj-00000" …, objects.go), whose reconciles a
// latency-bound round spreads over the replicas.
func benchKeyNames(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = shard.KeyOf("kshard-bench", fmt.Sprintf("obj-%05d", i))
	}
	return keys
}

// keyShare is the busiest member's share of keys at n members: a
// latency-bound benchmark's fleet finishes when its busiest replica does, so
// n replicas reach at most 1/share times one leader's throughput.
type keyShare struct{ avg, worst float64 }

func measureKeyShare(t testing.TB, cfg shard.Config, prefixes, keys []string, n int) keyShare {
	var s keyShare
	for _, prefix := range prefixes {
		r := mustRing(t, cfg, statefulSetNames(prefix, n))
		count := map[string]int{}
		for _, k := range keys {
			m, _ := r.OwnerOfKey(k)
			count[m]++
		}
		most := 0
		for _, c := range count {
			most = max(most, c)
		}
		share := float64(most) / float64(len(keys))
		s.avg += share
		s.worst = max(s.worst, share)
	}
	s.avg /= float64(len(prefixes))
	return s
}

// keyShareNamings adds to namingSamples the identities of the issue-42
// measurements: the benchmark's replicas (r-0…), and StatefulSets named
// bench and kshardop.
var keyShareNamings = append(slices.Clone(namingSamples), "r", "bench", "kshardop")

// TestSweepLoad reruns the measurement behind DefaultLoad and the advice on
// Load (docs/configuration.md): how much more than the mean the busiest
// member owns (it caps the fleet's throughput, and with the sharded cache its
// memory), against how many partitions move when one replica joins or
// leaves, and what a ring build costs. Per Load and ReplicationFactor:
//
//   - busiest ÷ mean: partitions of the busiest member over P/N, average and
//     worst over namingSamples, for N = 2..8, 2..16 and 2..64;
//   - keys N=4: the busiest replica's share of the bench's 2,000 objects
//     (average and worst over keyShareNamings), and the throughput cap it
//     implies, 1/share;
//   - join/leave: measureMovement over N = 2..32, × the ideal;
//   - build: one New at N = 8, 32 and 64.
//
// It takes minutes, so it is opt-in, like TestSweepReplicationFactor:
//
//	KSHARD_SWEEP=1 go test -run TestSweepLoad -v -timeout 30m ./internal/assign/
func TestSweepLoad(t *testing.T) {
	if os.Getenv("KSHARD_SWEEP") == "" {
		t.Skip("set KSHARD_SWEEP=1 to rerun the sweep behind DefaultLoad")
	}
	keys := benchKeyNames(2000)
	type point struct {
		p   int
		rfs []int
	}
	for _, pt := range []point{{271, []int{40, 100, 200}}, {1021, []int{40}}} {
		t.Logf("P=%d  load  RF | busiest÷mean N=2..8 avg/worst | N=2..16 avg/worst | N=2..64 avg/worst | keys N=4 avg/worst (cap) | join avg/worst | leave avg/worst | build N=8/32/64",
			pt.p)
		for _, load := range []float64{1.25, 1.15, 1.1, 1.05} {
			for _, rf := range pt.rfs {
				cfg := shard.Config{Partitions: pt.p, Load: load, ReplicationFactor: rf}.WithDefaults()
				b8 := measureBalance(t, cfg, namingSamples, 8)
				b16 := measureBalance(t, cfg, namingSamples, 16)
				b64 := measureBalance(t, cfg, namingSamples, 64)
				ks := measureKeyShare(t, cfg, keyShareNamings, keys, 4)
				m := measureMovement(t, cfg, namingSamples, 32)
				var builds []string
				for _, n := range []int{8, 32, 64} {
					start := time.Now()
					mustRing(t, cfg, statefulSetNames("kshard", n))
					builds = append(builds, time.Since(start).Round(10*time.Microsecond).String())
				}
				t.Logf("P=%d  %.2f %3d | %.3f/%.3f | %.3f/%.3f | %.3f/%.3f | %.1f%%/%.1f%% (%.2f×) | %.3f/%.2f | %.3f/%.2f | %s",
					pt.p, load, rf, b8.avg, b8.worst, b16.avg, b16.worst, b64.avg, b64.worst,
					100*ks.avg, 100*ks.worst, 1/ks.worst, m.upAvg, m.upWorst, m.downAvg, m.downWorst, strings.Join(builds, "/"))
			}
		}
	}
}
