package shard

import (
	"fmt"
	"math"
	"strconv"
)

const (
	// DefaultPartitions is the number of partitions of a ring. It is prime,
	// which the design asks for, and large enough that 64 members still get a
	// balanced share at DefaultLoad.
	DefaultPartitions = 271

	// DefaultLoad is the bounded-load factor: no member owns more than
	// ceil(DefaultLoad × Partitions / members) partitions. A fleet works at
	// the pace of its busiest replica, so the bound is what small rings get:
	// at 1.25 the busiest of 4 replicas owned up to 85 of 271 partitions
	// (31 %, so 4 replicas reached at most 3.2× one's throughput), and up to
	// 1.27× the mean over rings of 2–8 members and 16 StatefulSet namings.
	// At 1.05 that is 1.063× (72 of 271 at N=4), at 1.10 1.122× and at 1.15
	// 1.162×; of e2e/bench's 2,000 keys the busiest of 4 holds up to 29 %
	// at 1.05 against 33 % at 1.25. The price is movement: growing or
	// shrinking a ring of 2–32 members moves 1.65× the ideal number of
	// partitions on average (worst step 3.9×), against 1.20× (2.2×) at 1.25,
	// because members at the tighter bound pass more partitions on. Each
	// extra partition is one more handoff during a scale or restart; the
	// imbalance costs every second in between. TestSweepLoad measures both.
	DefaultLoad = 1.05

	// DefaultReplicationFactor is the number of virtual nodes per member on
	// consistent's hash circle, chosen by measurement (shard/README.md,
	// "Choosing the load and the replication factor"): at P=271 and load 1.25, growing or
	// shrinking a ring of 2–32 members moves 1.19× the ideal number of
	// partitions on average at 40, against 1.29× at 20; beyond 40 the gain
	// stops while ring builds, quadratic in members inside consistent, keep
	// getting slower. At load 1.05, 100 and 200 move 1.64× and 1.59× against
	// 1.65× at 40, and do not change the balance, which the bound sets.
	DefaultReplicationFactor = 40

	// MaxPartitions bounds Config.Partitions. A claim for 65536 partitions is
	// an 11 KiB annotation, which is as large as a Lease should carry.
	MaxPartitions = 65536

	// MaxReplicationFactor bounds Config.ReplicationFactor. Ring builds cost
	// about members² × factor inside consistent; beyond this bound they take
	// seconds, and movement stops improving long before.
	MaxReplicationFactor = 1024

	// hashScheme names how keys and members are hashed and placed: xxhash64
	// for keys (mod Partitions) and for consistent v1.0.0's circle, and the
	// hash-range bounds of the ranged schemes (RangePartitioner). Bump it
	// whenever any of that changes, so that replicas running old and new code
	// refuse to share a ring instead of disagreeing about owners.
	hashScheme = "xx1"
)

// Config holds the parameters that fix a ring's assignment. All replicas of a
// ring must use the same Config; compare Fingerprint to check.
type Config struct {
	// Partitions is the number of partitions keys are hashed into. It is fixed
	// for the life of a ring. Prefer a prime. Defaults to DefaultPartitions.
	Partitions int

	// Load is the bounded-load factor, greater than 1: no member owns more
	// than ceil(Load × Partitions / members) partitions. Lower values balance
	// better but move more partitions when members come and go.
	// Defaults to DefaultLoad.
	Load float64

	// ReplicationFactor is the number of virtual nodes per member on the hash
	// circle. Defaults to DefaultReplicationFactor.
	ReplicationFactor int

	// Scheme is how objects map to partitions: SchemeKey (xxhash64 of
	// "namespace/name" mod Partitions), or SchemeNamespace / SchemeUID
	// (contiguous ranges of the API server's FNV-1a hash, which sharded
	// list/watch can filter on). The ranged schemes allow at most
	// Scheme.MaxPartitions() partitions, so that any set of them fits in one
	// shard selector. Defaults to SchemeKey.
	Scheme Scheme

	// Balance, when greater than 0, places partitions by the objects they
	// hold as well as by number: replicas report their partitions' object
	// counts in their Leases (kshard.io/weights), and after consistent's
	// assignment partitions move from the heaviest member to the lightest until none
	// exceeds the mean weight by more than Balance (0.02: 2 %), or no move
	// helps. It needs SchemeNamespace, where a partition's load is the
	// objects of the namespaces hashed into it; the other schemes spread
	// objects evenly over partitions already. Lower values balance better
	// but move more partitions when counts change (shard/README.md,
	// "A ring that balances objects"). 0, the default, places by number.
	Balance float64
}

// WithDefaults returns c with every zero field replaced by its default.
// Non-zero fields, even invalid ones, are kept so that Validate can report them.
func (c Config) WithDefaults() Config {
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.Load == 0 {
		c.Load = DefaultLoad
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = DefaultReplicationFactor
	}
	if c.Scheme == "" {
		c.Scheme = SchemeKey
	}
	return c
}

// Validate reports the first parameter of c (after defaults) that cannot form a
// ring, as a *ConfigError.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if err := c.Scheme.validate(); err != nil {
		return err
	}
	if c.Partitions < 1 || c.Partitions > MaxPartitions {
		return &ConfigError{
			Field: "Partitions", Value: strconv.Itoa(c.Partitions),
			Reason: fmt.Sprintf("must be in [1, %d]; leave it 0 for the default %d", MaxPartitions, DefaultPartitions),
		}
	}
	if limit := c.Scheme.MaxPartitions(); c.Partitions > limit {
		return &ConfigError{
			Field: "Partitions", Value: strconv.Itoa(c.Partitions),
			Reason: fmt.Sprintf("must be at most %d with Scheme %q: a selector for every other partition of %d would be %d characters, beyond the API server's shard-selector limit of %d; choose fewer partitions",
				limit, c.Scheme, c.Partitions, worstCaseSelectorLength(c.Scheme, c.Partitions), maxSelectorLength),
		}
	}
	// NaN fails every comparison, so test for the valid range, not the invalid.
	if !(c.Load > 1) || math.IsInf(c.Load, 0) {
		return &ConfigError{
			Field: "Load", Value: strconv.FormatFloat(c.Load, 'g', -1, 64),
			Reason: fmt.Sprintf("must be a finite number greater than 1; leave it 0 for the default %g", DefaultLoad),
		}
	}
	if !(c.Balance >= 0 && c.Balance <= 1) {
		return &ConfigError{
			Field: "Balance", Value: strconv.FormatFloat(c.Balance, 'g', -1, 64),
			Reason: "must be a fraction in [0, 1], e.g. 0.05 for 5 %; 0 places partitions by number alone",
		}
	}
	if c.Balance > 0 && c.Scheme != SchemeNamespace {
		return &ConfigError{
			Field: "Balance", Value: strconv.FormatFloat(c.Balance, 'g', -1, 64),
			Reason: fmt.Sprintf("needs Scheme %q (the manager's PartitionBy): with Scheme %q every partition holds an even share of the objects already; leave Balance 0", SchemeNamespace, c.Scheme),
		}
	}
	if c.ReplicationFactor < 1 || c.ReplicationFactor > MaxReplicationFactor {
		return &ConfigError{
			Field: "ReplicationFactor", Value: strconv.Itoa(c.ReplicationFactor),
			Reason: fmt.Sprintf("must be in [1, %d]; leave it 0 for the default %d", MaxReplicationFactor, DefaultReplicationFactor),
		}
	}
	return nil
}

// Fingerprint returns a short string naming every parameter that affects the
// assignment (after defaults), e.g. "xx1-p271-l1.05-r40", with a suffix
// "-s<scheme>" for any Scheme but the default SchemeKey, e.g.
// "xx1-p271-l1.05-r40-suid", and "-b<Balance>" when Balance is set, e.g.
// "xx1-p271-l1.05-r40-snamespace-b0.02". A ring of SchemeKey without Balance
// has the fingerprint it had before schemes existed, so it still forms rings
// with older replicas of the same Partitions, Load and ReplicationFactor. Two
// replicas may share a ring only if their fingerprints are equal. It uses
// only the characters [a-z0-9.-], so it also fits Kubernetes label values.
func (c Config) Fingerprint() string {
	c = c.WithDefaults()
	// 'f' with precision -1 is the shortest exact decimal and never uses an
	// exponent, whose '+' would not be label-safe.
	fp := hashScheme +
		"-p" + strconv.Itoa(c.Partitions) +
		"-l" + strconv.FormatFloat(c.Load, 'f', -1, 64) +
		"-r" + strconv.Itoa(c.ReplicationFactor)
	if c.Scheme != SchemeKey {
		// Validate rejects schemes other than the known lowercase words;
		// an unvalidated one is still named, so it never matches a valid one.
		fp += "-s" + string(c.Scheme)
	}
	if c.Balance != 0 {
		fp += "-b" + strconv.FormatFloat(c.Balance, 'f', -1, 64)
	}
	return fp
}

// ConfigError says which Config field is invalid and what to do about it.
type ConfigError struct {
	Field  string // name of the Config field
	Value  string // the offending value as text
	Reason string // what a valid value looks like
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("shard: invalid Config.%s=%s: %s", e.Field, e.Value, e.Reason)
}
