package shard

import (
	"fmt"
	"strconv"
	"strings"
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

// LabelDomain is the suffix of every partition label's prefix:
// "<ring>.kshard.io".
const LabelDomain = "kshard.io"

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
	return ring + "." + LabelDomain + "/" + hashScheme + "-" + string(cfg.Scheme) + "-p" + strconv.Itoa(cfg.Partitions), nil
}

// PartitionLabelValue is the label value naming partition p: its decimal.
func PartitionLabelValue(p int) string { return strconv.Itoa(p) }

// ParsePartitionLabel returns the partition a label value names, and false
// when it names none of a ring of partitions partitions (empty, not a
// canonical decimal, or out of range): such an object is unlabelled for the
// ring and gets labelled again.
func ParsePartitionLabel(value string, partitions int) (int, bool) {
	if value == "" || len(value) > 6 || (len(value) > 1 && value[0] == '0') {
		return 0, false
	}
	p := 0
	for i := 0; i < len(value); i++ {
		c := value[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		p = p*10 + int(c-'0')
	}
	return p, p < partitions
}

// LabelSelectorIn returns the label selector of the objects labelled with a
// partition of set: "<key> in (p1,p2,…)". An empty set has no selector
// (ErrNoPartitions): the caller must not list at all.
func LabelSelectorIn(key string, set PartitionSet) (string, error) {
	if set.IsEmpty() {
		return "", ErrNoPartitions
	}
	return key + " in (" + joinPartitions(set) + ")", nil
}

// LabelSelectorUnlabelled returns the label selector of the objects that
// carry no valid partition label of a ring of partitions partitions:
// "<key> notin (0,1,…,P−1)", which matches objects without the key as well
// as those whose value names no partition (written by hand or by another
// tool). In steady state it matches nothing.
func LabelSelectorUnlabelled(key string, partitions int) string {
	return key + " notin (" + joinPartitions(FullPartitionSet(partitions)) + ")"
}

// MaxLabelPartitions bounds the partition count of a ring whose cache is
// sharded by labels: its unlabelled selector names every partition, and at
// this count it is about 5,000 characters (about 7,000 once URL-encoded),
// well within what API servers and the proxies in front of them accept for a
// request line.
const MaxLabelPartitions = 1024

func joinPartitions(set PartitionSet) string {
	var b strings.Builder
	first := true
	for p := range set.All() {
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(strconv.Itoa(p))
	}
	return b.String()
}

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
