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

func TestParsePartitionLabel(t *testing.T) {
	for _, tc := range []struct {
		value string
		p     int
		ok    bool
	}{
		{"0", 0, true},
		{"270", 270, true},
		{"271", 0, false}, // out of range
		{"", 0, false},
		{"007", 0, false}, // not canonical: would not match the "in" selector's "7"
		{"-1", 0, false},
		{"1e2", 0, false},
		{"12345678", 0, false},
		{"foo", 0, false},
	} {
		p, ok := ParsePartitionLabel(tc.value, 271)
		if ok != tc.ok || (ok && p != tc.p) {
			t.Errorf("ParsePartitionLabel(%q, 271) = %d, %v; want %d, %v", tc.value, p, ok, tc.p, tc.ok)
		}
	}
	for p := range 271 {
		if got, ok := ParsePartitionLabel(PartitionLabelValue(p), 271); !ok || got != p {
			t.Fatalf("round trip of %d gave %d, %v", p, got, ok)
		}
	}
}

func TestLabelSelectors(t *testing.T) {
	const key = "r.kshard.io/xx1-key-p5"
	if _, err := LabelSelectorIn(key, NewPartitionSet(5)); err != ErrNoPartitions {
		t.Errorf("LabelSelectorIn(empty) error = %v, want ErrNoPartitions", err)
	}
	got, err := LabelSelectorIn(key, NewPartitionSet(5, 4, 0, 2))
	if want := key + " in (0,2,4)"; err != nil || got != want {
		t.Errorf("LabelSelectorIn = %q, %v; want %q", got, err, want)
	}
	if got, want := LabelSelectorUnlabelled(key, 5), key+" notin (0,1,2,3,4)"; got != want {
		t.Errorf("LabelSelectorUnlabelled = %q, want %q", got, want)
	}
	if n := len(LabelSelectorUnlabelled("a-ring-name-of-some-length.kshard.io/xx1-namespace-p1024", MaxLabelPartitions)); n > 5000 {
		t.Errorf("the unlabelled selector at MaxLabelPartitions is %d characters; MaxLabelPartitions' doc says about 5,000", n)
	}
}
