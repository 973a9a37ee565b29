package main

import (
	"encoding/json"
	"fmt"
	"os"
)

// results is the part of the bench's results.json the charts read; the
// bench (e2e/bench/report.go and the phase files) defines the format.
// Sections of phases a run did not measure are absent.
type results struct {
	Params struct {
		Latency          string `json:"latency"`
		Workers          int    `json:"workers_per_replica"`
		BaselineReplicas int    `json:"baseline_replicas"`
	} `json:"params"`
	// Throughput is phase 2's latency-bound workload.
	Throughput struct {
		Configs []throughputConfig `json:"configs"`
	} `json:"throughput"`
	Handoff        []handoffRun        `json:"handoff"`   // phase 3
	Resources      []resourceRun       `json:"resources"` // phase 5
	ShardedRuns    []shardedRun        `json:"sharded_runs"`
	ShardedHandoff []shardedHandoffRun `json:"sharded_handoff_runs"`
	Scale          *struct {
		Runs []scaleRun `json:"runs"`
	} `json:"scale"`
	// Labels is phase 10: the gate-free sharded cache on custom resources.
	Labels *struct {
		Layouts []labelsLayout `json:"layouts"`
	} `json:"sharded_gate_off_runs"`
}

// labelsLayout is phase 10 on one control plane: its runs per round, and
// (the spread layout) its throughput and handoff.
type labelsLayout struct {
	Layout     string       `json:"layout"`
	Namespaces int          `json:"namespaces"`
	Runs       []shardedRun `json:"runs"`
	Throughput struct {
		Configs []throughputConfig `json:"configs"`
	} `json:"throughput"`
	Handoff *handoffRun `json:"handoff"`
}

// throughputConfig is one system at one replica count, over the rounds.
type throughputConfig struct {
	System   string  `json:"system"`
	Replicas int     `json:"replicas"`
	Active   int     `json:"active_replicas"`
	Median   float64 `json:"objects_per_second_median"`
	Min      float64 `json:"objects_per_second_min"`
	Max      float64 `json:"objects_per_second_max"`
	// Ratio: the median of per-round ratios to controller-runtime's.
	Ratio *float64 `json:"ratio_to_baseline_median"`
}

// throughputSample is one run of one round (phase 8 keeps only these).
type throughputSample struct {
	System        string  `json:"system"`
	Replicas      int     `json:"replicas"`
	ObjectsPerSec float64 `json:"objects_per_second"`
	Epochs        string  `json:"epochs"`
}

// delays are update → reconcile delays in seconds. Percentiles (every
// whole percentile, the 100th last) are absent from files written before
// the bench recorded them.
type delays struct {
	Updates     int       `json:"updates"`
	P50         float64   `json:"p50_seconds"`
	P99         float64   `json:"p99_seconds"`
	Max         float64   `json:"max_seconds"`
	Percentiles []float64 `json:"percentiles_seconds"`
}

type handoffRun struct {
	System   string `json:"system"`
	Replicas int    `json:"replicas"`
	Rollout  delays `json:"rollout"`
}

type resourceRun struct {
	System     string  `json:"system"`
	Replicas   int     `json:"replicas"`
	Objects    int     `json:"objects"`
	MaxPeakRSS float64 `json:"max_peak_rss_mib"`
}

type shardedRun struct {
	System string `json:"system"`
	// Kind is the objects' kind: ConfigMap (absent from older files) or
	// BenchObject, the custom resource.
	Kind       string  `json:"kind"`
	Round      int     `json:"round"` // phase 10
	CacheMode  string  `json:"cache_mode"`
	Replicas   int     `json:"replicas"`
	Objects    int     `json:"objects"`
	MaxPeakRSS float64 `json:"max_peak_rss_mib"`
	// RolloutMaxPeakRSS: the new processes of a rolling restart (kshard
	// with the gate on; absent from older files).
	RolloutMaxPeakRSS float64 `json:"rollout_max_peak_rss_mib"`
}

type shardedHandoffRun struct {
	CacheMode  string             `json:"cache_mode"`
	Throughput []throughputSample `json:"throughput"`
	Handoff    handoffRun         `json:"handoff"`
}

type scaleRun struct {
	Replicas   int     `json:"replicas"`
	Objects    int     `json:"objects"`
	Failed     string  `json:"failed"`
	PeakRSSMax float64 `json:"peak_rss_mib_max"`
	Rollout    delays  `json:"rollout"`
}

func readResults(path string) (*results, error) {
	js, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w; pass -results with the bench's results.json (e2e/bench/results.json)", err)
	}
	var r results
	if err := json.Unmarshal(js, &r); err != nil {
		return nil, fmt.Errorf("%s is not the bench's results.json: %v", path, err)
	}
	return &r, nil
}
