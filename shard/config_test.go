package shard

import (
	"errors"
	"math"
	"regexp"
	"testing"
)

func TestConfigWithDefaults(t *testing.T) {
	got := Config{}.WithDefaults()
	want := Config{Partitions: DefaultPartitions, Load: DefaultLoad, ReplicationFactor: DefaultReplicationFactor, Scheme: SchemeKey}
	if got != want {
		t.Fatalf("Config{}.WithDefaults() = %+v, want %+v", got, want)
	}
	set := Config{Partitions: 31, Load: 2, ReplicationFactor: 7, Scheme: SchemeUID}
	if got := set.WithDefaults(); got != set {
		t.Fatalf("WithDefaults changed set fields: %+v -> %+v", set, got)
	}
	// Invalid values must survive so Validate can name them.
	bad := Config{Partitions: -1, Load: -3, ReplicationFactor: -2, Scheme: "Bad"}
	if got := bad.WithDefaults(); got != bad {
		t.Fatalf("WithDefaults replaced invalid fields: %+v -> %+v", bad, got)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name      string
		cfg       Config
		wantField string // "" means valid
	}{
		{"zero value gets defaults", Config{}, ""},
		{"one partition", Config{Partitions: 1}, ""},
		{"max partitions", Config{Partitions: MaxPartitions}, ""},
		{"load just above 1", Config{Load: 1.0001}, ""},
		{"max replication factor", Config{ReplicationFactor: MaxReplicationFactor}, ""},
		{"negative partitions", Config{Partitions: -1}, "Partitions"},
		{"too many partitions", Config{Partitions: MaxPartitions + 1}, "Partitions"},
		{"load exactly 1", Config{Load: 1}, "Load"},
		{"load below 1", Config{Load: 0.8}, "Load"},
		{"negative load", Config{Load: -1.25}, "Load"},
		{"NaN load", Config{Load: math.NaN()}, "Load"},
		{"infinite load", Config{Load: math.Inf(1)}, "Load"},
		{"negative replication factor", Config{ReplicationFactor: -20}, "ReplicationFactor"},
		{"replication factor too large", Config{ReplicationFactor: MaxReplicationFactor + 1}, "ReplicationFactor"},
		{"namespace scheme", Config{Scheme: SchemeNamespace}, ""},
		{"uid scheme at its largest P", Config{Scheme: SchemeUID, Partitions: MaxUIDPartitions}, ""},
		{"namespace scheme beyond the selector limit", Config{Scheme: SchemeNamespace, Partitions: MaxNamespacePartitions + 1}, "Partitions"},
		{"uid scheme beyond the selector limit", Config{Scheme: SchemeUID, Partitions: MaxUIDPartitions + 1}, "Partitions"},
		{"key scheme has no selector limit", Config{Scheme: SchemeKey, Partitions: MaxUIDPartitions + 1}, ""},
		{"unknown scheme", Config{Scheme: "fnv"}, "Scheme"},
		{"scheme is case-sensitive", Config{Scheme: "UID"}, "Scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("Validate() = %v, want *ConfigError", err)
			}
			if ce.Field != tt.wantField {
				t.Fatalf("Validate() blamed %s, want %s (%v)", ce.Field, tt.wantField, err)
			}
		})
	}
}

func TestConfigFingerprint(t *testing.T) {
	base := Config{}.Fingerprint()
	// The default fingerprint is part of the wire contract between replicas:
	// if it changes, replicas on old and new code refuse each other.
	if want := "xx1-p271-l1.05-r40"; base != want {
		t.Errorf("default fingerprint = %q, want %q", base, want)
	}
	// Replicas built before DefaultLoad became 1.05 wrote this; a ring that
	// sets Load 1.25 must keep writing it to roll onto this version.
	if got, want := (Config{Load: 1.25}).Fingerprint(), "xx1-p271-l1.25-r40"; got != want {
		t.Errorf("fingerprint at load 1.25 = %q, want %q (the default before 1.05)", got, want)
	}
	if got := (Config{Partitions: DefaultPartitions, Load: DefaultLoad, ReplicationFactor: DefaultReplicationFactor}).Fingerprint(); got != base {
		t.Errorf("explicit defaults fingerprint %q differs from zero-value %q", got, base)
	}
	// The key scheme is the default: naming it keeps the old fingerprint, so
	// default rings still form with replicas built before schemes existed.
	if got := (Config{Scheme: SchemeKey}).Fingerprint(); got != base {
		t.Errorf("SchemeKey fingerprint %q differs from the default %q", got, base)
	}
	// Replicas with another scheme refuse to share a ring through the
	// fingerprint check (internal/handoff: a live active peer with another
	// fingerprint blocks activation, ErrForeignFingerprint), so each scheme
	// needs its own fingerprint.
	for s, want := range map[Scheme]string{SchemeNamespace: base + "-snamespace", SchemeUID: base + "-suid"} {
		if got := (Config{Scheme: s}).Fingerprint(); got != want {
			t.Errorf("Scheme %q: fingerprint %q, want %q", s, got, want)
		}
	}
	labelSafe := regexp.MustCompile(`^[a-z0-9.-]+$`)
	seen := map[string]Config{}
	for _, cfg := range []Config{
		{}, {Partitions: 1021}, {Load: 1.5}, {Load: 1.2500001}, {ReplicationFactor: 20}, {Partitions: 27, Load: 1.1, ReplicationFactor: 1},
		{Scheme: SchemeNamespace}, {Scheme: SchemeUID}, {Partitions: 1021, Scheme: SchemeUID},
	} {
		fp := cfg.Fingerprint()
		if prev, dup := seen[fp]; dup {
			t.Errorf("configs %+v and %+v share fingerprint %q", prev, cfg, fp)
		}
		seen[fp] = cfg
		if !labelSafe.MatchString(fp) {
			t.Errorf("fingerprint %q of %+v is not label-safe", fp, cfg)
		}
	}
}

func TestConfigErrorSaysWhatToDo(t *testing.T) {
	err := Config{Partitions: -5}.Validate()
	want := "shard: invalid Config.Partitions=-5: must be in [1, 65536]; leave it 0 for the default 271"
	if err == nil || err.Error() != want {
		t.Fatalf("Validate() = %v, want %q", err, want)
	}
}

func TestBalanceValidation(t *testing.T) {
	for _, cfg := range []Config{
		{Scheme: SchemeNamespace, Balance: -0.1},
		{Scheme: SchemeNamespace, Balance: 1.5},
		{Scheme: SchemeNamespace, Balance: math.NaN()},
		{Balance: 0.05},
		{Scheme: SchemeUID, Balance: 0.05},
	} {
		var ce *ConfigError
		if err := cfg.Validate(); !errors.As(err, &ce) || ce.Field != "Balance" {
			t.Errorf("%+v: %v, want a ConfigError on Balance", cfg, err)
		}
	}
	cfg := Config{Scheme: SchemeNamespace, Balance: 0.05}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if fp := cfg.Fingerprint(); fp != "xx1-p271-l1.05-r40-snamespace-b0.05" {
		t.Fatalf("fingerprint %q", fp)
	}
}
