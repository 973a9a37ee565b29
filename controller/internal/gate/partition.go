package gate

import (
	"reflect"
	"strconv"

	"github.com/cespare/xxhash/v2"

	"github.com/kshard/kshard/shard"
)

// Partitions maps a request's namespace and name to its partition exactly as
// p.Partition(shard.KeyOf(namespace, name)) would, without building the key
// string when p is kshard's own xxhash-mod-P partitioner.
type Partitions struct {
	p    shard.Partitioner
	mod  fastMod
	fast bool
}

// NewPartitions wraps p. The allocation-free path is used only when p is the
// shard package's own partitioner type and agrees with it on a set of probe
// keys, so a change of the shard hash can never silently split the ring.
func NewPartitions(p shard.Partitioner) Partitions {
	n := p.Count()
	ps := Partitions{p: p, mod: newFastMod(uint64(max(n, 1)))}
	ps.fast = n > 0 && reflect.TypeOf(p) == reflect.TypeOf(shard.NewPartitioner(n)) && ps.agrees()
	return ps
}

// Fast reports whether the allocation-free path is in use.
func (ps Partitions) Fast() bool { return ps.fast }

// Count is the number of partitions.
func (ps Partitions) Count() int { return ps.p.Count() }

// Of returns the partition of the request namespace/name.
func (ps Partitions) Of(namespace, name string) int {
	if !ps.fast {
		return ps.p.Partition(shard.KeyOf(namespace, name))
	}
	return int(ps.mod.of(hashKey(namespace, name)))
}

// hashKey is xxhash64 of shard.KeyOf(namespace, name), computed without
// building the key string (see xxh64Short and xxh64Joined).
func hashKey(namespace, name string) uint64 {
	if namespace == "" {
		return xxhash.Sum64String(name)
	}
	if len(namespace)+1+len(name) <= wordBuf {
		return xxh64Short(namespace, name)
	}
	return xxh64Joined(namespace, name)
}

// agrees checks the fast path against p on probe keys of every shape it
// handles: cluster-scoped, short, and longer than the stack buffer.
func (ps Partitions) agrees() bool {
	long := make([]byte, 400) // beyond several 32-byte stripes
	for i := range long {
		long[i] = 'a' + byte(i%26)
	}
	for i := range 64 {
		s := strconv.Itoa(i)
		probes := [][2]string{
			{"", "node-" + s},
			{"default", "cm-" + s},
			{"kube-system", "pod-" + s + "-abcdefghijklmnopqrstuvwxyz"},
			{"ns-" + s, string(long[:i*6])},
		}
		for _, pr := range probes {
			if int(ps.mod.of(hashKey(pr[0], pr[1]))) != ps.p.Partition(shard.KeyOf(pr[0], pr[1])) {
				return false
			}
		}
	}
	return true
}
