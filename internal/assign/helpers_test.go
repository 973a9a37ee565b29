package assign

import (
	"fmt"
	"testing"

	"github.com/kshard/kshard/shard"
)

// statefulSetNames returns the identities of an n-replica StatefulSet, the
// way kshard replicas are normally named.
func statefulSetNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// namingSamples are StatefulSet names to measure over, so that balance and
// movement figures do not rest on the hash values of one name.
var namingSamples = []string{
	"kshard", "example-operator", "web", "ctrl", "my-operator-controller", "a", "shard", "op",
	"cert-manager", "ingress", "db-operator", "x", "kshard-example", "replica", "worker", "mgr",
}

func mustRing(t testing.TB, cfg shard.Config, members []string) *Ring {
	t.Helper()
	r, err := New(cfg, members)
	if err != nil {
		t.Fatalf("New(%+v, %d members): %v", cfg, len(members), err)
	}
	return r
}

// ownerTable returns the owner of every partition; "" where there is none.
func ownerTable(r *Ring) []string {
	out := make([]string, r.Config().Partitions)
	for p := range out {
		out[p], _ = r.Owner(p)
	}
	return out
}

// movedPartitions counts partitions whose owner differs between a and b.
func movedPartitions(a, b *Ring) int {
	n := 0
	ta, tb := ownerTable(a), ownerTable(b)
	for p := range ta {
		if ta[p] != tb[p] {
			n++
		}
	}
	return n
}
