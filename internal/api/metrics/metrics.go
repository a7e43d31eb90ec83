// Package metrics is the Prometheus instrumentation of the HTTP API: the
// executions' outcomes, durations and network attempts, each API key's
// usage, the HTTP requests by route, the node's load, its sessions and
// the store, on a registry of the server's own (never the global one).
//
// It only counts: it never changes a request or an answer, and labels
// come from fixed sets or the operator's key names, never from anything a
// client chooses.
package metrics

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pyexec/pyexec/internal/engine"
)

// Metrics are the Prometheus metrics of one server, on a registry of its
// own (never the global default one).
type Metrics struct {
	registry   *prometheus.Registry
	executions *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	network    *prometheus.CounterVec
	secrets    *prometheus.CounterVec
	usage      *usageMetrics
}

// New creates the metrics; stats is read at every scrape for the queue
// depth and running sandboxes.
func New(stats func() engine.Stats) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pyexec_executions_total",
			Help: "Finished executions by final status and reason.",
		}, []string{"status", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pyexec_execution_duration_seconds",
			Help:    "Wall time of finished executions.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"status"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pyexec_http_requests_total",
			Help: "HTTP requests by route pattern and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pyexec_http_request_duration_seconds",
			Help:    "HTTP request latency by route pattern (streams count until they end).",
			Buckets: prometheus.DefBuckets,
		}, []string{"route"}),
	}
	m.network = newNetworkMetric()
	m.secrets = newSecretMetric()
	m.usage = newUsageMetrics()
	m.registry.MustRegister(m.usage.collectors()...)
	m.registry.MustRegister(
		m.executions, m.duration, m.requests, m.latency, m.network, m.secrets,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "pyexec_queue_depth",
			Help: "Executions waiting for a slot.",
		}, func() float64 { return float64(stats().Queued) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "pyexec_running_sandboxes",
			Help: "Executions running now, one sandbox each.",
		}, func() float64 { return float64(stats().Running) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "pyexec_capacity",
			Help: "Executions that may run at once.",
		}, func() float64 { return float64(stats().Capacity) }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// ObserveExecution counts a finished execution; records that are not
// final are ignored.
func (m *Metrics) ObserveExecution(e *engine.Execution) {
	if !e.Status.Final() {
		return
	}
	reason := e.Reason
	if reason == "" {
		reason = "none"
	}
	m.executions.WithLabelValues(string(e.Status), reason).Inc()
	m.duration.WithLabelValues(string(e.Status)).Observe(float64(e.DurationMs) / 1000)
	m.observeNetwork(e)
}

// Register adds further collectors to the registry.
func (m *Metrics) Register(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := m.registry.Register(c); err != nil {
			return fmt.Errorf("registering metrics: %w", err)
		}
	}
	return nil
}

// Handler serves the metrics in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// Instrument counts every request by the mux pattern that served it, so
// that ids in paths never become label values.
func (m *Metrics) Instrument(mux *http.ServeMux, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		route := "unmatched"
		if _, pattern := mux.Handler(r); pattern != "" && pattern != "/" {
			route = pattern
		}
		code := rec.status
		if code == 0 {
			code = http.StatusOK
		}
		m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
		m.latency.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

// statusRecorder remembers the status code written through it. Unwrap
// lets http.ResponseController reach the connection (to flush streams).
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
