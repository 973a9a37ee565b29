package shard

import (
	"strings"
	"testing"
)

func TestPartitionLabelKey(t *testing.T) {
	for _, tc := range []struct {
		ring string
		cfg  Config
		want string
		err  string
	}{
		{"example", Config{}, "example.kshard.io/xx1-key-p271", ""},
		{"widgets", Config{Partitions: 31, Scheme: SchemeNamespace}, "widgets.kshard.io/xx1-namespace-p31", ""},
		// Load and balance do not change an object's partition, so not the key either.
		{"widgets", Config{Partitions: 31, Scheme: SchemeNamespace, Load: 2, Balance: 0.1}, "widgets.kshard.io/xx1-namespace-p31", ""},
		{"Bad_Ring", Config{}, "", "not a DNS-1123 label"},
		{"", Config{}, "", "not a DNS-1123 label"},
		{"-lead", Config{}, "", "not a DNS-1123 label"},
		{strings.Repeat("a", 64), Config{}, "", "not a DNS-1123 label"},
		{"example", Config{Partitions: -1}, "", "Partitions"},
	} {
		got, err := PartitionLabelKey(tc.ring, tc.cfg)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("PartitionLabelKey(%q, %+v) = %q, %v; want an error containing %q", tc.ring, tc.cfg, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("PartitionLabelKey(%q, %+v) = %q, %v; want %q", tc.ring, tc.cfg, got, err, tc.want)
		}
	}
}
