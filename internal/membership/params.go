package membership

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/kshard/kshard/shard"
)

var paramsPattern = regexp.MustCompile(`^([a-z0-9]+)-p([0-9]+)-l([0-9.]+)-r([0-9]+)(?:-s([a-z]+))?(?:-b([0-9.]+))?$`)

// ParseParams reads a shard.Config back from its Fingerprint (the params
// annotation), e.g.
// "xx1-p271-l1.25-r40", "xx1-p271-l1.25-r40-snamespace" or
// "xx1-p271-l1.25-r40-snamespace-b0.05". It fails when the text is not a fingerprint this
// kshard writes, in particular one with another hash scheme: owners computed
// with other hashing would be wrong, so the CLI refuses to guess.
func ParseParams(text string) (shard.Config, error) {
	m := paramsPattern.FindStringSubmatch(text)
	if m == nil {
		return shard.Config{}, fmt.Errorf("not a ring-params fingerprint like %q; upgrade kshard to the replicas' version", shard.Config{}.Fingerprint())
	}
	p, err1 := strconv.Atoi(m[2])
	load, err2 := strconv.ParseFloat(m[3], 64)
	rf, err3 := strconv.Atoi(m[4])
	if err1 != nil || err2 != nil || err3 != nil {
		return shard.Config{}, fmt.Errorf("numbers out of range; upgrade kshard to the replicas' version")
	}
	cfg := shard.Config{Partitions: p, Load: load, ReplicationFactor: rf, Scheme: shard.Scheme(m[5])}
	if m[6] != "" {
		if cfg.Balance, err1 = strconv.ParseFloat(m[6], 64); err1 != nil {
			return shard.Config{}, fmt.Errorf("numbers out of range; upgrade kshard to the replicas' version")
		}
	}
	if err := cfg.Validate(); err != nil {
		return shard.Config{}, err
	}
	if got := cfg.Fingerprint(); got != text {
		return shard.Config{}, fmt.Errorf("written by a kshard with another hashing scheme (this one writes %q); upgrade kshard to the replicas' version", got)
	}
	return cfg, nil
}
