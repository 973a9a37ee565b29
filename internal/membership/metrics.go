package membership

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics of one Member, labelled with its ring.
type metrics struct {
	renews      prometheus.Counter
	renewErrors prometheus.Counter
	invalid     *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, ring string) (*metrics, error) {
	labels := prometheus.Labels{"ring": ring}
	m := &metrics{
		renews: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kshard_lease_renews_total", ConstLabels: labels,
			Help: "Successful writes of the own Lease (creates, takeovers and renews) whose response arrived within RenewTimeout.",
		}),
		renewErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kshard_lease_renew_errors_total", ConstLabels: labels,
			Help: "Failed writes of the own Lease, including responses that arrived after RenewTimeout.",
		}),
		invalid: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kshard_lease_invalid_total", ConstLabels: labels,
			Help: "Malformed Lease versions carrying the ring label, by reason, each version counted once; reason foreign_config counts Leases of another ring configuration once per configuration.",
		}, []string{"reason"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	m.renews, err = register(reg, m.renews)
	if err == nil {
		m.renewErrors, err = register(reg, m.renewErrors)
	}
	if err == nil {
		m.invalid, err = register(reg, m.invalid)
	}
	if err != nil {
		return nil, fmt.Errorf("lease: registering metrics: %w", err)
	}
	return m, nil
}

// register registers c, or returns the collector already registered under
// the same description (two Members of one ring in one process share it).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}
