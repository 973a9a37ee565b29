package membership

import (
	"testing"

	"github.com/kshard/kshard/shard"
)

func TestParseParams(t *testing.T) {
	for _, c := range []shard.Config{{}, {Partitions: 97, Load: 1.5, ReplicationFactor: 20}, {Partitions: 65536},
		{Scheme: shard.SchemeNamespace}, {Partitions: 1021, Scheme: shard.SchemeUID}, {Scheme: shard.SchemeNamespace, Balance: 0.05}} {
		text := c.Fingerprint()
		got, err := ParseParams(text)
		if err != nil || got.Fingerprint() != text {
			t.Errorf("ParseParams(%q) = %v, %v", text, got.Fingerprint(), err)
		}
	}
	for _, bad := range []string{"", "xx2-p271-l1.25-r40", "xx1-p0-l1.25-r40", "xx1-p271-l1-r40", "xx1-p271-l1.250-r40",
		"xx1-p99999999999999999999-l1.25-r40", "garbage",
		"xx1-p271-l1.25-r40-skey", "xx1-p271-l1.25-r40-sfnv", "xx1-p9999-l1.25-r40-suid",
		"xx1-p271-l1.25-r40-b0.05", "xx1-p271-l1.25-r40-snamespace-b2", "xx1-p271-l1.25-r40-snamespace-b0.050"} {
		if _, err := ParseParams(bad); err == nil {
			t.Errorf("ParseParams(%q) succeeded", bad)
		}
	}
}
