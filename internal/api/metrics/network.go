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

// observeNetwork counts the network events of a finished execution. The
// labels come from fixed sets (never a host name), so they stay few.
func (m *Metrics) observeNetwork(e *engine.Execution) {
	for _, ev := range e.NetworkEvents {
		reason := ev.Reason
		if reason == "" {
			reason = "none"
		}
		m.network.WithLabelValues(ev.Proto, ev.Verdict, reason).Inc()
	}
}
