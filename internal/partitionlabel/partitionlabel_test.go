package partitionlabel

import (
	"strings"
	"testing"

	"github.com/kshard/kshard/shard"
)

func TestParse(t *testing.T) {
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
		p, ok := Parse(tc.value, 271)
		if ok != tc.ok || (ok && p != tc.p) {
			t.Errorf("Parse(%q, 271) = %d, %v; want %d, %v", tc.value, p, ok, tc.p, tc.ok)
		}
	}
	for p := range 271 {
		if got, ok := Parse(shard.PartitionLabelValue(p), 271); !ok || got != p {
			t.Fatalf("round trip of %d gave %d, %v", p, got, ok)
		}
	}
}

func TestSelectors(t *testing.T) {
	const key = "r.kshard.io/xx1-key-p5"
	if _, err := SelectorIn(key, shard.NewPartitionSet(5)); err != shard.ErrNoPartitions {
		t.Errorf("SelectorIn(empty) error = %v, want ErrNoPartitions", err)
	}
	got, err := SelectorIn(key, shard.NewPartitionSet(5, 4, 0, 2))
	if want := key + " in (0,2,4)"; err != nil || got != want {
		t.Errorf("SelectorIn = %q, %v; want %q", got, err, want)
	}
	if got, want := SelectorUnlabelled(key, 5), key+" notin (0,1,2,3,4)"; got != want {
		t.Errorf("SelectorUnlabelled = %q, want %q", got, want)
	}
	if n := len(SelectorUnlabelled("a-ring-name-of-some-length.kshard.io/xx1-namespace-p1024", shard.MaxLabelPartitions)); n > 5000 {
		t.Errorf("the unlabelled selector at MaxLabelPartitions is %d characters; MaxLabelPartitions' doc says about 5,000", n)
	}
}

// Domain is the domain shard.PartitionLabelKey puts in every key.
func TestDomainIsShards(t *testing.T) {
	key, err := shard.PartitionLabelKey("r", shard.Config{})
	if err != nil || !strings.HasPrefix(key, "r."+Domain+"/") {
		t.Errorf("PartitionLabelKey = %q, %v; want the prefix %q", key, err, "r."+Domain+"/")
	}
}
