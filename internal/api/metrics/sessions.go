package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pyexec/pyexec/internal/engine"
)

// SessionCollector exposes the engine's sessions on /metrics: live, busy
// and hibernated sessions, the memory their jails use, and the
// hibernations and resumes done and failed, read at each scrape.
func SessionCollector(stats func() engine.SessionStats) prometheus.Collector {
	return sessionCollector{
		stats:      stats,
		live:       prometheus.NewDesc("pyexec_sessions", "Live sessions on this node.", nil, nil),
		busy:       prometheus.NewDesc("pyexec_sessions_busy", "Sessions running a cell now.", nil, nil),
		asleep:     prometheus.NewDesc("pyexec_sessions_hibernated", "Sessions hibernated now (saved, without an interpreter).", nil, nil),
		memory:     prometheus.NewDesc("pyexec_sessions_memory_bytes", "Memory in use by every session's jail.", nil, nil),
		hibernates: prometheus.NewDesc("pyexec_session_hibernations_total", "Hibernations of idle sessions, by outcome: saved; failed (the save failed, the session stays awake and is tried again later); ended (the session's interpreter ended as it was saved, and the session ended).", []string{"outcome"}, nil),
		resumes:    prometheus.NewDesc("pyexec_session_resumes_total", "Hibernated sessions resumed, by outcome.", []string{"outcome"}, nil),
	}
}

type sessionCollector struct {
	stats                      func() engine.SessionStats
	live, busy, asleep, memory *prometheus.Desc
	hibernates, resumes        *prometheus.Desc
}

func (c sessionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.live, c.busy, c.asleep, c.memory, c.hibernates, c.resumes} {
		ch <- d
	}
}

func (c sessionCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(c.live, prometheus.GaugeValue, float64(s.Live))
	ch <- prometheus.MustNewConstMetric(c.busy, prometheus.GaugeValue, float64(s.Busy))
	ch <- prometheus.MustNewConstMetric(c.asleep, prometheus.GaugeValue, float64(s.Asleep))
	ch <- prometheus.MustNewConstMetric(c.memory, prometheus.GaugeValue, float64(s.MemoryBytes))
	ch <- prometheus.MustNewConstMetric(c.hibernates, prometheus.CounterValue, float64(s.Hibernated), "saved")
	ch <- prometheus.MustNewConstMetric(c.hibernates, prometheus.CounterValue, float64(s.HibernateFailed), "failed")
	ch <- prometheus.MustNewConstMetric(c.hibernates, prometheus.CounterValue, float64(s.HibernateEnded), "ended")
	ch <- prometheus.MustNewConstMetric(c.resumes, prometheus.CounterValue, float64(s.Resumed), "resumed")
	ch <- prometheus.MustNewConstMetric(c.resumes, prometheus.CounterValue, float64(s.ResumeFailed), "failed")
}
