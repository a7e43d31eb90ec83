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

// newSecretMetric counts the events about operator secrets by secret name
// (the operator's names, a fixed set) and outcome: "injected" (the egress
// wrote the value into a request), or the reason a placeholder was not
// replaced or a request to the secret's host was refused.
func newSecretMetric() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pyexec_secret_events_total",
		Help: "Injections of operator secrets (outcome injected) and refusals by reason, by secret name (docs/network.md).",
	}, []string{"secret", "outcome"})
}

// observeNetwork counts the network events of a finished execution. The
// labels come from fixed sets (never a host name), so they stay few.
func (m *Metrics) observeNetwork(e *engine.Execution) {
	for _, ev := range e.NetworkEvents {
		reason := ev.Reason
		if reason == "" {
			reason = "none"
		}
		m.network.WithLabelValues(ev.Proto, ev.Verdict, reason).Inc()
		switch {
		case ev.Secret == "":
		case ev.Verdict == "allow":
			m.secrets.WithLabelValues(ev.Secret, "injected").Inc()
		default:
			m.secrets.WithLabelValues(ev.Secret, reason).Inc()
		}
	}
}
