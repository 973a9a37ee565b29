package cli

import (
	"strings"
	"testing"

	"github.com/kshard/kshard/shard"
)

// The ring's partition labels are picked out of an object's labels, the
// current key's first with the partition it names; other rings' labels and
// unrelated ones are left out.
func TestPartitionLabels(t *testing.T) {
	params := shard.Config{}.Fingerprint() // 271 partitions, key scheme
	current := "ops.kshard.io/xx1-key-p271"
	labels := map[string]string{
		"app":                          "x",
		"ops.kshard.io/xx1-key-p13":    "4",  // an earlier partition count
		current:                        "57", // the ring's label
		"opsx.kshard.io/xx1-key-p271":  "1",  // another ring whose name starts alike
		"other.kshard.io/xx1-key-p271": "9",
	}
	got := partitionLabels("ops", params, labels)
	if len(got) != 2 || got[0].Key != current || !got[0].Current || got[0].Partition == nil || *got[0].Partition != 57 ||
		got[1].Key != "ops.kshard.io/xx1-key-p13" || got[1].Current || got[1].Partition != nil {
		t.Fatalf("partitionLabels = %+v", got)
	}
	for _, tc := range []struct {
		label partitionLabel
		key   int
		want  string
	}{
		{got[0], 57, "partition 57, its key's"},
		{got[0], 12, "not its key's 12"},
		{got[1], 57, "other ring parameters"},
		{partitionLabel{Key: current, Value: "999", Current: true}, 57, "names no partition"},
	} {
		if d := tc.label.describe(tc.key); !strings.Contains(d, tc.want) {
			t.Errorf("%+v for key partition %d: %q, want %q", tc.label, tc.key, d, tc.want)
		}
	}
	// A value out of range under the current key names no partition.
	if got := partitionLabels("ops", params, map[string]string{current: "271"}); len(got) != 1 || got[0].Partition != nil {
		t.Errorf("value 271 of 271 partitions: %+v, want no partition", got)
	}
	// Params this CLI cannot read: every label of the domain is shown, none as current.
	if got := partitionLabels("ops", "garbage", labels); len(got) != 2 || got[0].Current || got[1].Current {
		t.Errorf("unreadable params: %+v", got)
	}
}
