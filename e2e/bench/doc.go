// Command bench runs kshard and a leader-elected controller-runtime baseline on one
// local control plane and reports throughput, handoff, failover and resource ratios:
// `go run ./e2e/bench` writes results.json and RESULTS.md (-quick: a CI smoke run); `make charts`
// draws the PNGs RESULTS.md shows from results.json (e2e/bench/charts, a module of its own);
// `-report-only` renders RESULTS.md again from results.json without measuring.
// Phase 6 measures kshard's crash failover when the container is restarted in place (the
// kubelet's report proves the death; the bench plays the kubelet with fixed delays, see
// restart.go) beside the lease-wait failover, over several kills: results.json keys
// restart_failover_seconds (p50), restart_failover_p99_seconds and
// lease_wait_failover_{p50,p99}_seconds.
//
// The throughput rounds of phases 2, 8 and 10 run on -throughput-objects
// objects (4,000), the other phases on -objects (2,000): a latency-bound
// round lasts until its busiest replica has done its share, and 2,000 keys
// over 4 replicas cap the ratio at 3.66× (4,000: 3.82×). Each throughput
// run records its busiest share and that cap (busiest_share, spread_cap),
// which RESULTS.md shows beside each ratio. On 2 cores every default phase
// takes about 3 h 45 min (BENCH_TIMEOUT=5h with make bench), phases 1-8
// about 65 min.
//
// `-phases 4,6` runs some phases only and merges: the other phases' sections of the
// results.json already in -out are kept (merge.go), each listed with the command, date and
// load of the run that measured it under phases_from_earlier_runs; -merge=false replaces.
package main
