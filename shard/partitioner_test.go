package shard

import (
	"fmt"
	"testing"

	"github.com/cespare/xxhash/v2"
)

func TestKeyOf(t *testing.T) {
	tests := []struct{ namespace, name, want string }{
		{"default", "web", "default/web"},
		{"", "node-1", "node-1"},
		{"kube-system", "", "kube-system/"},
	}
	for _, tt := range tests {
		if got := KeyOf(tt.namespace, tt.name); got != tt.want {
			t.Errorf("KeyOf(%q, %q) = %q, want %q", tt.namespace, tt.name, got, tt.want)
		}
	}
}

// Replicas of two builds must place a singleton on the same partition, so
// its key is fixed.
func TestSingletonKey(t *testing.T) {
	if got := SingletonKey("gc"); got != "singleton/gc" {
		t.Fatalf("SingletonKey(%q) = %q, want %q", "gc", got, "singleton/gc")
	}
}

func TestPartitionerIsXXHashModP(t *testing.T) {
	for _, p := range []int{1, 2, 271, 1021, MaxPartitions} {
		part := NewPartitioner(p)
		if part.Count() != p {
			t.Fatalf("NewPartitioner(%d).Count() = %d", p, part.Count())
		}
		for i := range 1000 {
			key := KeyOf(fmt.Sprintf("ns-%d", i%7), fmt.Sprintf("obj-%d", i))
			want := int(xxhash.Sum64([]byte(key)) % uint64(p))
			if got := part.Partition(key); got != want {
				t.Fatalf("P=%d Partition(%q) = %d, want %d", p, key, got, want)
			}
		}
	}
}

func TestPartitionerDefaultsInvalidCounts(t *testing.T) {
	for _, p := range []int{0, -1, -271} {
		part := NewPartitioner(p)
		if part.Count() != DefaultPartitions {
			t.Errorf("NewPartitioner(%d).Count() = %d, want %d", p, part.Count(), DefaultPartitions)
		}
		if got := part.Partition("default/x"); got < 0 || got >= DefaultPartitions {
			t.Errorf("NewPartitioner(%d).Partition out of range: %d", p, got)
		}
	}
}

// Keys must spread evenly over partitions, or partition balance means nothing.
func TestPartitionerSpreadsKeys(t *testing.T) {
	const p, keys = 271, 271 * 200
	counts := make([]int, p)
	part := NewPartitioner(p)
	for i := range keys {
		counts[part.Partition(KeyOf(fmt.Sprintf("team-%d", i%13), fmt.Sprintf("deployment-%d", i)))]++
	}
	// Chi-square with 270 degrees of freedom: mean 270, sd ≈ 23; 400 is
	// more than 5 sd above, so only a biased partitioner exceeds it.
	expected := float64(keys) / p
	chi2 := 0.0
	for _, c := range counts {
		d := float64(c) - expected
		chi2 += d * d / expected
	}
	if chi2 > 400 {
		t.Fatalf("chi-square %.1f over %d partitions: keys are not spread evenly", chi2, p)
	}
	t.Logf("chi-square %.1f (270 degrees of freedom)", chi2)
}
