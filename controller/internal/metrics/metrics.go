package metrics

import (
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// Result label values of controller_runtime_reconcile_total.
const (
	ResultSuccess      = "success"
	ResultError        = "error"
	ResultRequeue      = "requeue"
	ResultRequeueAfter = "requeue_after"
)

// Decision label values of kshard_gate_decisions_total.
const (
	DecisionAdmitted = "admitted"
	DecisionForeign  = "foreign"
	DecisionInactive = "inactive"
)

// Families are the metric families of every controller registered with one
// Registerer.
type Families struct {
	reconcileTotal    *prometheus.CounterVec
	reconcileErrors   *prometheus.CounterVec
	terminalErrors    *prometheus.CounterVec
	panics            *prometheus.CounterVec
	reconcileTime     *prometheus.HistogramVec
	maxConcurrent     *prometheus.GaugeVec
	activeWorkers     *prometheus.GaugeVec
	gateDecisions     *prometheus.CounterVec
	partitionInflight *prometheus.GaugeVec
	replayBacklog     *prometheus.GaugeVec
	drainOverdue      *prometheus.CounterVec
	refused           *prometheus.CounterVec

	depth          *prometheus.GaugeVec
	adds           *prometheus.CounterVec
	latency        *prometheus.HistogramVec
	workDuration   *prometheus.HistogramVec
	unfinished     *prometheus.GaugeVec
	longestRunning *prometheus.GaugeVec
	retries        *prometheus.CounterVec
}

// Register registers the families with reg, or adopts the ones already
// registered there (by an earlier controller, or by controller-runtime in the
// same process), so any number of controllers can share a registry.
func Register(reg prometheus.Registerer) (*Families, error) {
	if reg == nil {
		return nil, errors.New("metrics: Registerer is nil")
	}
	f := &Families{}
	var err error
	ctl := []string{"controller"}
	wq := []string{"name", "controller"}
	counter := func(dst **prometheus.CounterVec, name, help string, labels []string) {
		if err == nil {
			*dst, err = adopt(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
		}
	}
	gauge := func(dst **prometheus.GaugeVec, name, help string, labels []string) {
		if err == nil {
			*dst, err = adopt(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
		}
	}
	histogram := func(dst **prometheus.HistogramVec, name, help string, buckets []float64, labels []string) {
		if err == nil {
			*dst, err = adopt(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels))
		}
	}

	counter(&f.reconcileTotal, "controller_runtime_reconcile_total", "Total number of reconciliations per controller", []string{"controller", "result"})
	counter(&f.reconcileErrors, "controller_runtime_reconcile_errors_total", "Total number of reconciliation errors per controller", ctl)
	counter(&f.terminalErrors, "controller_runtime_terminal_reconcile_errors_total", "Total number of terminal reconciliation errors per controller", ctl)
	counter(&f.panics, "controller_runtime_reconcile_panics_total", "Total number of reconciliation panics per controller", ctl)
	histogram(&f.reconcileTime, "controller_runtime_reconcile_time_seconds", "Length of time per reconciliation per controller",
		[]float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}, ctl)
	gauge(&f.maxConcurrent, "controller_runtime_max_concurrent_reconciles", "Maximum number of concurrent reconciles per controller", ctl)
	gauge(&f.activeWorkers, "controller_runtime_active_workers", "Number of currently used workers per controller", ctl)
	counter(&f.gateDecisions, "kshard_gate_decisions_total",
		"Shard gate decisions per controller: admitted (event request of an active partition, queued), foreign (event request of a partition not active here, dropped before the queue), inactive (queued request dropped when dequeued because its partition was revoked meanwhile)",
		[]string{"controller", "decision"})
	gauge(&f.partitionInflight, "kshard_partition_inflight", "Number of reconciles in flight per controller, summed over its partitions", ctl)
	gauge(&f.replayBacklog, "kshard_replay_backlog", "Requests of an activation's replay not queued yet per controller: fed to the queue a few at a time, so live events do not wait behind them", ctl)
	counter(&f.refused, "kshard_reconcile_refused_total",
		"Reconciles not started because the replica's lease validity (last renewal sent + RenewDeadline) had passed, after failed renewals or a pause; the request was requeued", ctl)
	counter(&f.drainOverdue, "kshard_drain_overdue_total", "Number of partition drains (Revoke calls) that took longer than DrainReportAfter", ctl)

	latencyBuckets := prometheus.ExponentialBuckets(10e-9, 10, 12)
	gauge(&f.depth, "workqueue_depth", "Current depth of workqueue", wq)
	counter(&f.adds, "workqueue_adds_total", "Total number of adds handled by workqueue", wq)
	histogram(&f.latency, "workqueue_queue_duration_seconds", "How long in seconds an item stays in workqueue before being requested", latencyBuckets, wq)
	histogram(&f.workDuration, "workqueue_work_duration_seconds", "How long in seconds processing an item from workqueue takes", latencyBuckets, wq)
	gauge(&f.unfinished, "workqueue_unfinished_work_seconds", "How many seconds of work has been done that is in progress and hasn't been observed by work_duration", wq)
	gauge(&f.longestRunning, "workqueue_longest_running_processor_seconds", "How many seconds has the longest running processor for workqueue been running", wq)
	counter(&f.retries, "workqueue_retries_total", "Total number of retries handled by workqueue", wq)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// adopt registers c, or returns the equal collector already registered.
func adopt[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
		return c, fmt.Errorf("metrics: a collector of another type (%T) is already registered under the same name: %w", are.ExistingCollector, err)
	}
	return c, fmt.Errorf("metrics: registering: %w", err)
}

var claimed = struct {
	sync.Mutex
	names map[*prometheus.CounterVec]map[string]struct{}
}{names: map[*prometheus.CounterVec]map[string]struct{}{}}

// Claim records that a controller named name reports into f's registry and
// reports false if one already does. The registry is identified by its
// reconcile_total family, which Register shares among all users of it.
func (f *Families) Claim(name string) bool {
	claimed.Lock()
	defer claimed.Unlock()
	set := claimed.names[f.reconcileTotal]
	if set == nil {
		set = map[string]struct{}{}
		claimed.names[f.reconcileTotal] = set
	}
	if _, dup := set[name]; dup {
		return false
	}
	set[name] = struct{}{}
	return true
}

// Controller holds one controller's pre-resolved series.
type Controller struct {
	Success, Error, Requeue, RequeueAfter prometheus.Counter
	Errors, TerminalErrors, Panics        prometheus.Counter
	ReconcileTime                         prometheus.Observer
	MaxConcurrent, ActiveWorkers          prometheus.Gauge
	Admitted, Foreign, Inactive           prometheus.Counter
	Inflight, ReplayBacklog               prometheus.Gauge
	DrainOverdue                          prometheus.Counter
	Refused                               prometheus.Counter
}

// For resolves (and so creates, at zero) every series of controller.
func (f *Families) For(controller string) *Controller {
	return &Controller{
		Success:        f.reconcileTotal.WithLabelValues(controller, ResultSuccess),
		Error:          f.reconcileTotal.WithLabelValues(controller, ResultError),
		Requeue:        f.reconcileTotal.WithLabelValues(controller, ResultRequeue),
		RequeueAfter:   f.reconcileTotal.WithLabelValues(controller, ResultRequeueAfter),
		Errors:         f.reconcileErrors.WithLabelValues(controller),
		TerminalErrors: f.terminalErrors.WithLabelValues(controller),
		Panics:         f.panics.WithLabelValues(controller),
		ReconcileTime:  f.reconcileTime.WithLabelValues(controller),
		MaxConcurrent:  f.maxConcurrent.WithLabelValues(controller),
		ActiveWorkers:  f.activeWorkers.WithLabelValues(controller),
		Admitted:       f.gateDecisions.WithLabelValues(controller, DecisionAdmitted),
		Foreign:        f.gateDecisions.WithLabelValues(controller, DecisionForeign),
		Inactive:       f.gateDecisions.WithLabelValues(controller, DecisionInactive),
		Inflight:       f.partitionInflight.WithLabelValues(controller),
		ReplayBacklog:  f.replayBacklog.WithLabelValues(controller),
		DrainOverdue:   f.drainOverdue.WithLabelValues(controller),
		Refused:        f.refused.WithLabelValues(controller),
	}
}

// QueueProvider returns the workqueue metrics provider of controller. It is
// passed per queue (TypedRateLimitingQueueConfig.MetricsProvider), never
// through client-go's global, once-only workqueue.SetProvider, so several
// registries and controllers coexist in one process.
func (f *Families) QueueProvider(controller string) workqueue.MetricsProvider {
	return queueProvider{f: f, controller: controller}
}

type queueProvider struct {
	f          *Families
	controller string
}

func (p queueProvider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return p.f.depth.WithLabelValues(name, p.controller)
}

func (p queueProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	return p.f.adds.WithLabelValues(name, p.controller)
}

func (p queueProvider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return p.f.latency.WithLabelValues(name, p.controller)
}

func (p queueProvider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return p.f.workDuration.WithLabelValues(name, p.controller)
}

func (p queueProvider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.f.unfinished.WithLabelValues(name, p.controller)
}

func (p queueProvider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.f.longestRunning.WithLabelValues(name, p.controller)
}

func (p queueProvider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return p.f.retries.WithLabelValues(name, p.controller)
}
