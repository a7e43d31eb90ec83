package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pyexec/pyexec/internal/engine"
)

// workspaceScrapeTimeout bounds one measurement of the workspaces.
const workspaceScrapeTimeout = 5 * time.Second

// WorkspaceCollector exposes the workspaces on /metrics, measured at each
// scrape (engine.Engine.WorkspaceUsage): how many, the bytes of their
// current versions, of the store and of this node's cache, and the mounts
// in use, and the version trees this node built and derived (counters
// since the node started). A measurement that fails exposes nothing.
func WorkspaceCollector(usage func(context.Context) (engine.WorkspaceStats, error)) prometheus.Collector {
	return workspaceCollector{
		usage:  usage,
		count:  prometheus.NewDesc("pyexec_workspaces", "Workspaces of every key.", nil, nil),
		bytes:  prometheus.NewDesc("pyexec_workspace_bytes", "Bytes of the workspaces' current versions together.", nil, nil),
		store:  prometheus.NewDesc("pyexec_workspace_store_bytes", "Bytes the workspaces' store of record holds (every kept version).", nil, nil),
		cache:  prometheus.NewDesc("pyexec_workspace_cache_bytes", "Bytes of this node's workspace blob cache.", nil, nil),
		mounts: prometheus.NewDesc("pyexec_workspace_mounts", "Runs and sessions with a workspace mounted on this node.", nil, nil),
		built: prometheus.NewDesc("pyexec_workspace_trees_built_total",
			"Version trees this node built whole from their manifests (a hard link per file) since it started.", nil, nil),
		derived: prometheus.NewDesc("pyexec_workspace_trees_derived_total",
			"Version trees this node derived from the tree of the version before, after a commit, since it started.", nil, nil),
	}
}

type workspaceCollector struct {
	usage                              func(context.Context) (engine.WorkspaceStats, error)
	count, bytes, store, cache, mounts *prometheus.Desc
	built, derived                     *prometheus.Desc
}

func (c workspaceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.count, c.bytes, c.store, c.cache, c.mounts, c.built, c.derived} {
		ch <- d
	}
}

func (c workspaceCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), workspaceScrapeTimeout)
	defer cancel()
	s, err := c.usage(ctx)
	if err != nil && !errors.Is(err, engine.ErrWorkspaceMounts) {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(s.Workspaces))
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(s.Bytes))
	ch <- prometheus.MustNewConstMetric(c.store, prometheus.GaugeValue, float64(s.StoreBytes))
	ch <- prometheus.MustNewConstMetric(c.cache, prometheus.GaugeValue, float64(s.CacheBytes))
	ch <- prometheus.MustNewConstMetric(c.mounts, prometheus.GaugeValue, float64(s.Mounts))
	ch <- prometheus.MustNewConstMetric(c.built, prometheus.CounterValue, float64(s.TreesBuilt))
	ch <- prometheus.MustNewConstMetric(c.derived, prometheus.CounterValue, float64(s.TreesDerived))
}
