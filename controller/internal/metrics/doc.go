// Package metrics holds a controller's Prometheus metrics: controller-runtime's
// controller_runtime_* and workqueue_* families (same names and labels, so
// existing dashboards work) plus kshard_* gate and drain metrics. Families are
// registered once per Registerer and shared by every controller using it;
// each controller resolves its label values once, so the event path only
// increments pre-resolved counters.
package metrics
