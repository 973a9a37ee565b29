// Package recorder is the e2e tests' flight recorder and its checker: every
// replica, the harness and the ConfigMap writer append one JSON line per event
// to their own file, and Check merges the files to find keys reconciled by two
// processes at once, updates never reconciled (CheckWithin: or reconciled
// later than a bound, faults aside), and handoff timings;
// CheckWrites does the same for the writes replicas sent (KindSend).
package recorder
