package pool

import "github.com/prometheus/client_golang/prometheus"

// Collector exposes the pool's state as Prometheus metrics.
func (p *Pool) Collector() prometheus.Collector { return collector{p} }

type collector struct{ p *Pool }

var (
	descKinds    = prometheus.NewDesc("pyexec_pool_kinds", "Payload kinds kept warm.", nil, nil)
	descWarm     = prometheus.NewDesc("pyexec_pool_warm_jails", "Warm jails ready to take.", nil, nil)
	descMemory   = prometheus.NewDesc("pyexec_pool_warm_memory_bytes", "Memory held by warm jails waiting for work.", nil, nil)
	descRuns     = prometheus.NewDesc("pyexec_pool_executions_total", "Executions by how the pool served them: warm, miss (its kind had none ready) or cold (could not use the pool).", []string{"path"}, nil)
	descFailed   = prometheus.NewDesc("pyexec_pool_build_failures_total", "Warm jails that failed to build.", nil, nil)
	descForked   = prometheus.NewDesc("pyexec_pool_forked_ready", "Of the warm jails ready, executions forked from a fork server.", nil, nil)
	descForkMem  = prometheus.NewDesc("pyexec_pool_forked_memory_bytes", "Memory of their own held by forked executions waiting for work.", nil, nil)
	descPrecopy  = prometheus.NewDesc("pyexec_pool_forked_precopy_ready", "Of the forked executions ready, those that copied ahead the pages executions of their fork server (one with preloads) write.", nil, nil)
	descPreMem   = prometheus.NewDesc("pyexec_pool_forked_precopy_memory_bytes", "Memory of their own held by those forked executions that copied ahead.", nil, nil)
	descTpl      = prometheus.NewDesc("pyexec_pool_fork_servers", "Fork servers running.", nil, nil)
	descTplMem   = prometheus.NewDesc("pyexec_pool_fork_server_memory_bytes", "Memory held by fork servers (interpreters with their preloads, and lean ones without).", nil, nil)
	descForkRuns = prometheus.NewDesc("pyexec_pool_forked_executions_total", "Executions served by an execution forked from a fork server.", nil, nil)
	descLeanRuns = prometheus.NewDesc("pyexec_pool_lean_executions_total", "Of the forked executions, those whose code imports only the standard library, forked from a fork server without preloads.", nil, nil)
	descNetRuns  = prometheus.NewDesc("pyexec_pool_network_executions_total", "Of the warm executions, those with network: a network namespace of their own, the execution's egress attached at hand-off.", nil, nil)
	descSess     = prometheus.NewDesc("pyexec_pool_forked_sessions", "Session kernels forked from a fork server, alive.", nil, nil)
	descSessMem  = prometheus.NewDesc("pyexec_pool_forked_session_memory_bytes", "Memory of their own held by session kernels forked from a fork server.", nil, nil)
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descKinds, descWarm, descMemory, descRuns, descFailed, descForked, descForkMem, descPrecopy, descPreMem, descTpl, descTplMem, descForkRuns, descLeanRuns, descNetRuns, descSess, descSessMem} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.p.Stats()
	ch <- prometheus.MustNewConstMetric(descKinds, prometheus.GaugeValue, float64(s.Kinds))
	ch <- prometheus.MustNewConstMetric(descWarm, prometheus.GaugeValue, float64(s.Warm))
	ch <- prometheus.MustNewConstMetric(descMemory, prometheus.GaugeValue, float64(s.WarmMemory))
	ch <- prometheus.MustNewConstMetric(descRuns, prometheus.CounterValue, float64(s.Hits), "warm")
	ch <- prometheus.MustNewConstMetric(descRuns, prometheus.CounterValue, float64(s.Misses), "miss")
	ch <- prometheus.MustNewConstMetric(descRuns, prometheus.CounterValue, float64(s.Cold), "cold")
	ch <- prometheus.MustNewConstMetric(descFailed, prometheus.CounterValue, float64(s.BuildFailed))
	ch <- prometheus.MustNewConstMetric(descForked, prometheus.GaugeValue, float64(s.Forked))
	ch <- prometheus.MustNewConstMetric(descForkMem, prometheus.GaugeValue, float64(s.ForkMemory))
	ch <- prometheus.MustNewConstMetric(descPrecopy, prometheus.GaugeValue, float64(s.Precopied))
	ch <- prometheus.MustNewConstMetric(descPreMem, prometheus.GaugeValue, float64(s.PrecopyMemory))
	ch <- prometheus.MustNewConstMetric(descTpl, prometheus.GaugeValue, float64(s.Templates))
	ch <- prometheus.MustNewConstMetric(descTplMem, prometheus.GaugeValue, float64(s.TemplateMemory))
	ch <- prometheus.MustNewConstMetric(descForkRuns, prometheus.CounterValue, float64(s.ForkedRuns))
	ch <- prometheus.MustNewConstMetric(descLeanRuns, prometheus.CounterValue, float64(s.LeanRuns))
	ch <- prometheus.MustNewConstMetric(descNetRuns, prometheus.CounterValue, float64(s.NetworkRuns))
	ch <- prometheus.MustNewConstMetric(descSess, prometheus.GaugeValue, float64(s.Sessions))
	ch <- prometheus.MustNewConstMetric(descSessMem, prometheus.GaugeValue, float64(s.SessionMemory))
}
