// Package recorder is the flight recorder and checker behind kshard's test
// kit (manager/kshardtest) and its own e2e and chaos suites: every replica,
// the harness and the ConfigMap writer append one JSON line per event to
// their own file, and Check merges the files to find keys reconciled by two
// processes at once, updates never reconciled (CheckWithin: or reconciled
// later than a bound, faults aside), and handoff timings; CheckWrites does
// the same for the writes replicas sent (KindSend). The kit hands users a
// small surface over it (kshardtest.Recorder, kshardtest.Report); kshard's
// own harness, test operators and benchmarks use it whole.
package recorder
