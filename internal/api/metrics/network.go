package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pyexec/pyexec/internal/engine"
)

func newNetworkMetric() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pyexec_network_attempts_total",
		Help: "Connection attempts and name lookups of payloads by protocol, verdict and reason (docs/network.md).",
	}, []string{"proto", "verdict", "reason"})
}

// newSecretMetric counts the events about operator secrets by outcome:
// "injected" (the egress wrote the value into a request), or the reason a
// placeholder was not replaced or a request to the secret's host was
// refused. Not by secret: /metrics is readable with any API key, and a
// secret's name is for the keys it is given to (the planner answers
// another key's secret as an unknown name).
func newSecretMetric() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pyexec_secret_events_total",
		Help: "Injections of operator secrets (outcome injected) and refusals by reason (docs/network.md).",
	}, []string{"outcome"})
}

// observeNetwork counts the network events of a finished execution.
func (m *Metrics) observeNetwork(e *engine.Execution) {
	for _, ev := range e.NetworkEvents {
		m.ObserveNetworkEvent(ev)
	}
}

// ObserveNetworkEvent counts one network event, of an execution or of a
// session (as it happens). The labels come from fixed sets (never a host
// name), so they stay few.
func (m *Metrics) ObserveNetworkEvent(ev engine.NetworkEvent) {
	reason := ev.Reason
	if reason == "" {
		reason = "none"
	}
	m.network.WithLabelValues(ev.Proto, ev.Verdict, reason).Inc()
	switch {
	case ev.Secret == "":
	case ev.Verdict == "allow":
		m.secrets.WithLabelValues("injected").Inc()
	default:
		m.secrets.WithLabelValues(reason).Inc()
	}
}
