package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pyexec/pyexec/internal/engine"
)

// SessionCollector exposes the engine's sessions on /metrics: live and
// busy sessions and the memory their jails use, read at each scrape.
func SessionCollector(stats func() engine.SessionStats) prometheus.Collector {
	return sessionCollector{
		stats:  stats,
		live:   prometheus.NewDesc("pyexec_sessions", "Live sessions on this node.", nil, nil),
		busy:   prometheus.NewDesc("pyexec_sessions_busy", "Sessions running a cell now.", nil, nil),
		memory: prometheus.NewDesc("pyexec_sessions_memory_bytes", "Memory in use by every session's jail.", nil, nil),
	}
}

type sessionCollector struct {
	stats              func() engine.SessionStats
	live, busy, memory *prometheus.Desc
}

func (c sessionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.live
	ch <- c.busy
	ch <- c.memory
}

func (c sessionCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(c.live, prometheus.GaugeValue, float64(s.Live))
	ch <- prometheus.MustNewConstMetric(c.busy, prometheus.GaugeValue, float64(s.Busy))
	ch <- prometheus.MustNewConstMetric(c.memory, prometheus.GaugeValue, float64(s.MemoryBytes))
}
