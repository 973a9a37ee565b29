package alertcheck

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
)

// A case is one alert's fault and clean runs: series in promqltest's load
// notation (one sample a minute from time 0; "a+bxN" is N more samples
// stepping by b, "_" a missing sample), with the labels a ServiceMonitor
// scrape adds (namespace, job, pod). The series follow what the replicas
// report in the faults the alerts are for (see the comments); the rule is
// evaluated every minute for evalFor, as Prometheus evaluates a group.
type alertCase struct {
	fault, clean string
	evalFor      time.Duration
	// want are labels the firing alert must carry at the end of the
	// fault run.
	want map[string]string
}

const ring = `namespace="ops",job="widgets"`

var cases = map[string]alertCase{
	"KshardRingUnclaimedPartitions": {
		// Fault: every replica refuses to join (another configuration), so
		// the 271 partitions stay unclaimed. Clean: a replica is killed
		// without a proof of death; its 90 partitions wait out LeaseDuration
		// (one sample) and are claimed.
		fault: `kshard_ring_unclaimed_partitions{` + ring + `,pod="w-0"} 0 0 271x10
			kshard_ring_unclaimed_partitions{` + ring + `,pod="w-1"} 0 0 271x10`,
		clean: `kshard_ring_unclaimed_partitions{` + ring + `,pod="w-0"} 0 0 90 0x9
			kshard_ring_unclaimed_partitions{` + ring + `,pod="w-1"} 0 0 90 0x9`,
		evalFor: 12 * time.Minute,
		want:    map[string]string{"namespace": "ops", "job": "widgets", "severity": "critical"},
	},
	"KshardRingOverlappingPartitions": {
		// Fault: a reconcile ignores its cancellation, so the old owner
		// never releases 3 partitions. Clean: a rolling restart, each
		// handoff overlapping for a sample or two.
		fault:   `kshard_ring_overlapping_partitions{` + ring + `,pod="w-1"} 0 0 3x20`,
		clean:   `kshard_ring_overlapping_partitions{` + ring + `,pod="w-1"} 0 90 0 0 0 85 88 0 0 0 0 90 0x10`,
		evalFor: 22 * time.Minute,
		want:    map[string]string{"namespace": "ops", "job": "widgets"},
	},
	"KshardRingMalformedLeases": {
		fault:   `kshard_ring_malformed_leases{` + ring + `,pod="w-0"} 0 1x10`,
		clean:   `kshard_ring_malformed_leases{` + ring + `,pod="w-0"} 0x10`,
		evalFor: 10 * time.Minute,
		want:    map[string]string{"namespace": "ops", "job": "widgets"},
	},
	"KshardRingForeignLeases": {
		// Fault: a replica started with another --partitions (the others
		// see one foreign Lease). Clean: none.
		fault: `kshard_ring_foreign_leases{` + ring + `,pod="w-0"} 0 1x10
			kshard_ring_foreign_leases{` + ring + `,pod="w-2"} 0 2x10`,
		clean:   `kshard_ring_foreign_leases{` + ring + `,pod="w-0"} 0x10`,
		evalFor: 10 * time.Minute,
		want:    map[string]string{"namespace": "ops", "job": "widgets"},
	},
	"KshardHandoffStuck": {
		// Fault: a drain that never completes ages a minute a minute.
		// Clean: takeovers of a few seconds, as in a rolling restart.
		fault: `kshard_ring_oldest_pending_seconds{` + ring + `,pod="w-1",phase="drain"} 0 0+60x10
			kshard_ring_oldest_pending_seconds{` + ring + `,pod="w-1",phase="takeover"} 0x11`,
		clean: `kshard_ring_oldest_pending_seconds{` + ring + `,pod="w-1",phase="drain"} 0 1.5 0 0 0 2 0x5
			kshard_ring_oldest_pending_seconds{` + ring + `,pod="w-1",phase="takeover"} 0 0 10.2 0 0 3 0x5`,
		evalFor: 11 * time.Minute,
		want:    map[string]string{"pod": "w-1", "phase": "drain"},
	},
	"KshardDrainOverdue": {
		// The counter exists at 0 from the controller's start.
		fault:   `kshard_drain_overdue_total{` + ring + `,pod="w-1",controller="widgets"} 0 0 0 1 1 1 1 1`,
		clean:   `kshard_drain_overdue_total{` + ring + `,pod="w-1",controller="widgets"} 0x7`,
		evalFor: 7 * time.Minute,
		want:    map[string]string{"pod": "w-1", "controller": "widgets"},
	},
	"KshardFencedRepeatedly": {
		// Fault: renewals fail again and again (a starved process).
		// Clean: one fence during an API server outage.
		fault:   `kshard_fences_total{` + ring + `,pod="w-2"} 0 0 1 2 3 4 5 6 7 8 9`,
		clean:   `kshard_fences_total{` + ring + `,pod="w-2"} 0 0 1x8`,
		evalFor: 10 * time.Minute,
		want:    map[string]string{"pod": "w-2"},
	},
	"KshardReplicaNotReady": {
		// Fault: a replica stays unready (waiting for a Lease of another
		// configuration to go). Clean: a restart, unready for a minute.
		fault:   `kshard_ready{` + ring + `,pod="w-2"} 1 1 0x15`,
		clean:   `kshard_ready{` + ring + `,pod="w-2"} 1 1 0 1x14`,
		evalFor: 16 * time.Minute,
		want:    map[string]string{"pod": "w-2"},
	},
	"KshardRingMembersBelowReplicas": {
		// Fault: w-2 runs but never joins; the others see 2 members.
		// Clean: all 3 are members, a restart aside.
		fault: `kshard_ready{` + ring + `,pod="w-0"} 1x15
			kshard_ready{` + ring + `,pod="w-1"} 1x15
			kshard_ready{` + ring + `,pod="w-2"} 0x15
			kshard_ring_members{` + ring + `,pod="w-0"} 2x15
			kshard_ring_members{` + ring + `,pod="w-1"} 2x15
			kshard_ring_members{` + ring + `,pod="w-2"} 0x15`,
		clean: `kshard_ready{` + ring + `,pod="w-0"} 1x15
			kshard_ready{` + ring + `,pod="w-1"} 1x15
			kshard_ready{` + ring + `,pod="w-2"} 1 1 0 1x12
			kshard_ring_members{` + ring + `,pod="w-0"} 3 3 2 3x12
			kshard_ring_members{` + ring + `,pod="w-1"} 3 3 2 3x12
			kshard_ring_members{` + ring + `,pod="w-2"} 3 3 0 3x12`,
		evalFor: 15 * time.Minute,
		want:    map[string]string{"namespace": "ops", "job": "widgets"},
	},
	"KshardCacheMissingObjects": {
		fault:   `kshard_cache_missing_objects{` + ring + `,pod="w-0",kind="/v1, Kind=ConfigMap",group="",version="v1",kind_name="ConfigMap"} 0 0 2x5`,
		clean:   `kshard_cache_missing_objects{` + ring + `,pod="w-0",kind="/v1, Kind=ConfigMap",group="",version="v1",kind_name="ConfigMap"} 0x7`,
		evalFor: 7 * time.Minute,
		want:    map[string]string{"pod": "w-0", "kind_name": "ConfigMap", "severity": "critical"},
	},
	"KshardLabelBacklogGrowing": {
		// Fault: patches forbidden, every new object queues. Clean:
		// bursts of creations, labelled within a minute.
		fault:   `kshard_cache_label_backlog{` + ring + `,pod="w-0",kind="/v1, Kind=ConfigMap",group="",version="v1",kind_name="ConfigMap"} 0 0+20x25`,
		clean:   `kshard_cache_label_backlog{` + ring + `,pod="w-0",kind="/v1, Kind=ConfigMap",group="",version="v1",kind_name="ConfigMap"} 0 40 0 35 0 0 50 0 20 0 0 30 0 45 0 0 10 0 30 0 0 40 0 35 0 0`,
		evalFor: 25 * time.Minute,
		want:    map[string]string{"pod": "w-0", "kind_name": "ConfigMap"},
	},
}

// loadRules parses the rules file as Prometheus does.
func loadRules(t *testing.T) []rulefmt.Rule {
	t.Helper()
	groups, errs := rulefmt.ParseFile(filepath.Join(root, RulesFile), false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("%s: %v", RulesFile, errs)
	}
	var out []rulefmt.Rule
	for _, g := range groups.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// firing evaluates rule over series every minute for evalFor and returns
// the alerts firing at each evaluation.
func firing(t *testing.T, r rulefmt.Rule, series string, evalFor time.Duration) [][]*rules.Alert {
	t.Helper()
	storage := promqltest.LoadedStorage(t, "load 1m\n"+series)
	engine := promqltest.NewTestEngine(t, false, 5*time.Minute, promqltest.DefaultMaxSamplesPerQuery)
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
	if err != nil {
		t.Fatalf("%s: %v", r.Alert, err)
	}
	rule := rules.NewAlertingRule(r.Alert, expr, time.Duration(r.For), time.Duration(r.KeepFiringFor),
		labels.FromMap(r.Labels), labels.FromMap(r.Annotations), labels.EmptyLabels(), "", true, slog.New(slog.DiscardHandler))
	query := rules.EngineQueryFunc(engine, storage)
	var out [][]*rules.Alert
	for at := time.Duration(0); at <= evalFor; at += time.Minute {
		if _, err := rule.Eval(context.Background(), 0, time.Unix(0, 0).UTC().Add(at), query, nil, 0); err != nil {
			t.Fatalf("%s at %s: %v", r.Alert, at, err)
		}
		var now []*rules.Alert
		for _, a := range rule.ActiveAlerts() {
			if a.State == rules.StateFiring {
				now = append(now, a)
			}
		}
		out = append(out, now)
	}
	return out
}

// TestAlertsFireOnFaultsOnly: every alert of the rules file has a case;
// it fires by the end of its fault run, with the labels the case names,
// and never during its clean run.
func TestAlertsFireOnFaultsOnly(t *testing.T) {
	alerts := loadRules(t)
	var names []string
	for _, r := range alerts {
		if r.Alert == "" {
			continue
		}
		names = append(names, r.Alert)
		c, ok := cases[r.Alert]
		if !ok {
			t.Errorf("alert %s has no fault and clean case in cases", r.Alert)
			continue
		}
		t.Run(r.Alert, func(t *testing.T) {
			fault := firing(t, r, c.fault, c.evalFor)
			last := fault[len(fault)-1]
			if len(last) == 0 {
				t.Fatalf("did not fire at the end of the fault run (%s)", c.evalFor)
			}
			for k, v := range c.want {
				if got := last[0].Labels.Get(k); got != v {
					t.Errorf("fired with %s=%q, want %q (labels %s)", k, got, v, last[0].Labels)
				}
			}
			if r.For > 0 && len(fault[0]) > 0 {
				t.Errorf("fired at the first evaluation despite for: %s", r.For)
			}
			for i, now := range firing(t, r, c.clean, c.evalFor) {
				if len(now) > 0 {
					t.Fatalf("fired on the clean run at minute %d: %s", i, now[0].Labels)
				}
			}
		})
	}
	for name := range cases {
		if !slices.Contains(names, name) {
			t.Errorf("case %s names no alert of %s", name, RulesFile)
		}
	}
}
