// Command bench runs kshard and a leader-elected controller-runtime baseline on one
// local control plane and reports throughput, handoff, failover and resource ratios:
// `go run ./e2e/bench` writes results.json, RESULTS.md and throughput.png (-quick: a CI smoke run).
package main
