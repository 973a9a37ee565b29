// Package alertcheck checks kshard's monitoring files under
// deploy/monitoring: the alert rules (each alert fires on its fault series
// and stays silent on a clean one, evaluated by Prometheus's own rule
// engine), that the PrometheusRule carries exactly the plain rules file's
// groups (it is generated from it: go test . -update), and that every
// kshard_* metric the rules and the Grafana dashboard query is one kshard
// exports. It is a module of its own, so Prometheus's dependencies stay
// out of kshard's published modules; make alerts-check runs its tests.
package alertcheck
