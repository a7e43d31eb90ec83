package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pyexec/pyexec/internal/engine"
)

// usageMetrics count what each API key used. The key label is the key's
// name from the operator's configuration (or "anonymous" on a server
// without keys), never anything a client chooses, so the labels stay as
// few as the configured keys.
type usageMetrics struct {
	executions, cpu, output *prometheus.CounterVec
}

func newUsageMetrics() *usageMetrics {
	return &usageMetrics{
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pyexec_key_executions_total",
			Help: "Finished executions by API key name.",
		}, []string{"key"}),
		cpu: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pyexec_key_cpu_seconds_total",
			Help: "CPU time of finished executions by API key name.",
		}, []string{"key"}),
		output: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pyexec_key_output_bytes_total",
			Help: "Stdout and stderr bytes kept of finished executions by API key name.",
		}, []string{"key"}),
	}
}

func (u *usageMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{u.executions, u.cpu, u.output}
}

// ObserveUsage counts a finished execution under the name of the API key
// that owns it; records that are not final are ignored.
func (m *Metrics) ObserveUsage(f *engine.Finished) {
	if !f.Status.Final() {
		return
	}
	m.usage.executions.WithLabelValues(f.Owner).Inc()
	m.usage.cpu.WithLabelValues(f.Owner).Add(float64(f.CPUTimeMs) / 1000)
	m.usage.output.WithLabelValues(f.Owner).Add(float64(f.OutputBytes))
}
