package shard

import (
	"fmt"
	"strconv"
)

// A partition label puts an object's partition on the object itself, so that
// a replica can list and watch only the objects of the partitions it holds
// with an ordinary label selector, on any Kubernetes version and for any kind
// (the gate-free sharded cache, manager.Options.CacheMode labels).
//
// The label's value is the partition of the request the object maps to — a
// pure function of that key and the ring's partition function — and never the
// member that owns it. So partitions move without a single write, any replica
// labels an object with the same value as any other (racing writers agree),
// and an object is labelled once in its life.
//
// The label's key names the ring and everything that fixes the partition
// function: the hash version, the scheme and the partition count, as in
// "example.kshard.io/xx1-key-p271". One object can so carry the labels of
// several rings, and a ring whose partition function changes (a new partition
// count, say) finds every object unlabelled under its new key, as at its
// first start, rather than holding labels that name wrong partitions.
//
// Reading labels back (parsing a value, the selectors of a replica's
// partitions and of the unlabelled objects) is kshard's own business:
// internal/partitionlabel.

// labelDomain is the suffix of every partition label's prefix:
// "<ring>.kshard.io" (internal/partitionlabel.Domain, for the CLI).
const labelDomain = "kshard.io"

// PartitionLabelKey returns the key of ring's partition label under cfg
// (after defaults), e.g. "example.kshard.io/xx1-key-p271". ring must be a
// DNS-1123 label, as ring names are; it fails otherwise, and for a Config
// that does not validate.
func PartitionLabelKey(ring string, cfg Config) (string, error) {
	if err := cfg.Validate(); err != nil {
		return "", err
	}
	if !isDNSLabel(ring) {
		return "", fmt.Errorf("shard: ring name %q is not a DNS-1123 label (lower-case letters, digits and '-', at most 63 characters), so it cannot prefix a label key", ring)
	}
	cfg = cfg.WithDefaults()
	return ring + "." + labelDomain + "/" + hashScheme + "-" + string(cfg.Scheme) + "-p" + strconv.Itoa(cfg.Partitions), nil
}

// PartitionLabelValue is the label value naming partition p: its decimal.
func PartitionLabelValue(p int) string { return strconv.Itoa(p) }

// MaxLabelPartitions bounds the partition count of a ring whose cache is
// sharded by labels: its unlabelled selector names every partition, and at
// this count it is about 5,000 characters (about 7,000 once URL-encoded),
// well within what API servers and the proxies in front of them accept for a
// request line.
const MaxLabelPartitions = 1024

// isDNSLabel reports whether s is a DNS-1123 label: 1–63 characters of
// [a-z0-9-], starting and ending with a letter or digit.
func isDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
		if !alnum && (c != '-' || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}
