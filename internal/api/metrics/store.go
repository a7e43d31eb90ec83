package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pyexec/pyexec/internal/engine"
)

// StoreCollector exposes how full the shared store is on /metrics: bytes
// used, the limit (0: none), evictions so far and whether it is near or
// above the limit, read at each scrape.
func StoreCollector(stats func() engine.StoreStats) prometheus.Collector {
	return storeCollector{
		stats:     stats,
		used:      prometheus.NewDesc("pyexec_store_bytes", "Bytes held by records, their index, events, request payloads and artifacts.", nil, nil),
		limit:     prometheus.NewDesc("pyexec_store_max_bytes", "The store's size limit (--store-max-bytes); 0 when there is none.", nil, nil),
		evictions: prometheus.NewDesc("pyexec_store_evictions_total", "Finished executions evicted to keep the store below its limit.", nil, nil),
		state: prometheus.NewDesc("pyexec_store_state", "1 for the store's current state: ok, near_limit or full.",
			[]string{"state"}, nil),
	}
}

type storeCollector struct {
	stats                         func() engine.StoreStats
	used, limit, evictions, state *prometheus.Desc
}

func (c storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.used
	ch <- c.limit
	ch <- c.evictions
	ch <- c.state
}

func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(s.UsedBytes))
	ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(s.MaxBytes))
	ch <- prometheus.MustNewConstMetric(c.evictions, prometheus.CounterValue, float64(s.Evictions))
	for _, st := range []string{engine.StoreOK, engine.StoreNearLimit, engine.StoreFull} {
		v := 0.0
		if s.State == st {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, v, st)
	}
}
