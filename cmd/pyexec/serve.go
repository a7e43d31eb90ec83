//go:build linux

package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/pyexec/pyexec/internal/api"
	"github.com/pyexec/pyexec/internal/api/metrics"
	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
)

// responseGrace is how long requests in flight still get once the drain
// has ended: the executions they wait for are being stopped and recorded,
// and their final state should still reach the caller.
const responseGrace = 5 * time.Second

func newServeCmd() *cobra.Command {
	cfg := config.Default()
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP API, the embedded store and the sandboxes",
		Long: "serve starts the python-executor-compatible HTTP API with an embedded NATS JetStream store\n" +
			"under --data-dir. Every flag can also be set with the PYEXEC_* variable named in its help;\n" +
			"flags win. Without API keys the server listens on loopback only.",
		Args: cobra.NoArgs,
		RunE: wrap(func(cmd *cobra.Command, _ []string) (int, error) {
			if err := cfg.Resolve(cmd.Flags(), os.LookupEnv); err != nil {
				return 2, err
			}
			if err := cfg.Validate(); err != nil {
				return 2, fmt.Errorf("invalid configuration:\n%w", err)
			}
			log := cfg.NewLogger(cmd.ErrOrStderr())
			sd := newShutdown(cmd.Context(), cfg.ShutdownTimeout, true, log)
			defer sd.release()
			if err := serve(sd, cfg, log); err != nil {
				return 1, err
			}
			return 0, nil
		}),
	}
	cfg.Bind(cmd.Flags())
	return cmd
}

// serve runs the stack (interpreters, jails, store, engine) with the HTTP
// API on top until sd says stop; teardown runs in reverse order.
func serve(sd *shutdown, cfg config.Config, log *slog.Logger) error {
	// Listen first: a taken port should fail before anything else starts.
	ln, err := net.Listen("tcp", cfg.Addr())
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Addr(), err)
	}
	defer ln.Close()
	return serveOn(sd, ln, cfg, log, nil)
}

// serveOn serves on ln until sd.stopping ends, then stops (see stack.stop):
// no new work, running executions get until sd.drain, then everything this
// server started is ended and its jails removed. ready, if not nil, is
// closed once the API accepts requests (the --local mode waits for it).
func serveOn(sd *shutdown, ln net.Listener, cfg config.Config, log *slog.Logger, ready chan<- struct{}) (err error) {
	stopProfiling, err := startProfiling(log)
	if err != nil {
		return err
	}
	defer stopProfiling()
	// Until the stack is up the port answers 503 with what it waits for.
	starting := newStartup(buildVersion(), len(cfg.APIKeys) > 0)
	handOver := serveStartup(ln, starting, log)
	// The engine reports finished executions to the API's metrics, which
	// exist only once the API does: the sink bridges the two.
	var sink atomic.Pointer[metrics.Metrics]
	st, err := startStack(sd.stopping, cfg, log, starting.waitingForNATS(log), func(f engine.Finished) {
		if m := sink.Load(); m != nil {
			m.ObserveExecution(&f.Execution)
			m.ObserveUsage(&f)
		}
	}, func(ev engine.NetworkEvent) {
		if m := sink.Load(); m != nil {
			m.ObserveNetworkEvent(ev)
		}
	})
	if err != nil {
		_ = handOver().Close()
		if sd.stopping.Err() != nil {
			log.Info("stopped before the server was ready", "while", err)
			return nil
		}
		return err
	}
	defer func() {
		sd.start()
		err = errors.Join(err, st.stop(sd))
	}()
	// The engine drains while the API finishes its requests: a sync
	// execution's request ends when the engine has recorded it.
	go func() {
		<-sd.stopping.Done()
		_ = st.closeEngine(sd.drain)
	}()

	isolation := "jail"
	if cfg.UnsafeNoIsolation {
		isolation = "none (unsafe)"
		log.Warn("running code WITHOUT isolation (--unsafe-no-isolation)")
	}
	opts := api.Options{Config: cfg, Version: buildVersion(), Isolation: isolation,
		Logger: log.With("component", "api"), BaseEnvironment: st.base.String, Tools: st.tools.health,
		ShutdownTimeout: cfg.ShutdownTimeout + responseGrace, Store: st.eng.StoreStats,
		PythonVersions: st.pythons.Versions(), DefaultPython: st.pythons.Default().Version,
		Node: cfg.Cluster.NodeName, NATS: st.natsHealth, Sessions: st.sessions}
	if cfg.Cluster.External() {
		opts.PreviewFleet = st.sessions // previews of sessions other nodes hold are relayed there
		if cfg.Preview.Enabled && cfg.Cluster.AdvertiseURL == "" {
			log.Warn("previews on a fleet without --advertise-url: the other nodes relay this node's previews, "+
				"with the viewer's API key, to node_url, which reaches this node from its own host only (none: they cannot); "+
				"give each node of a fleet of several hosts its --advertise-url", "node_url", cfg.NodeURL())
		}
	}
	if st.pool != nil {
		opts.Collectors = append(opts.Collectors, st.pool.Collector())
	}
	opts.Collectors = append(opts.Collectors, metrics.SessionCollector(st.eng.SessionStats), metrics.StoreCollector(st.eng.StoreStats))
	if cfg.Workspaces.Enabled {
		opts.Workspaces = st.eng.WorkspaceUsage
		opts.Collectors = append(opts.Collectors, metrics.WorkspaceCollector(st.eng.WorkspaceUsage))
	}
	srv, err := api.New(st.eng, opts)
	if err != nil {
		return err
	}
	sink.Store(srv.Metrics())
	// The API takes the port before anyone is told it is ready.
	apiLn := handOver()
	log.Info("serving", "addr", ln.Addr().String(), "data_dir", cfg.DataDir, "env_dir", st.envs.Dir(), "installer", st.tools.health().Installer,
		"pythons", st.pythons.Versions(), "default_python", st.pythons.Default().Version)
	if ready != nil {
		close(ready)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sd.stopping, apiLn) }()
	select {
	case err := <-served:
		return err
	case <-sd.afterDrain(responseGrace):
		// Serve's own timeout is counted from the first signal: after a
		// forced drain, requests still open must not hold the stop.
		log.Warn("requests still open after the drain: stopping without them")
		return nil
	}
}
