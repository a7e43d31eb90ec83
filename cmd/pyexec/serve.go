package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/pyexec/pyexec/internal/api"
	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
)

// engineDrainTimeout is how long running executions get to finish at
// shutdown before they are recorded as failed/node_lost.
const engineDrainTimeout = 30 * time.Second

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
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := serve(ctx, cfg, log); err != nil {
				return 1, err
			}
			return 0, nil
		}),
	}
	cfg.Bind(cmd.Flags())
	return cmd
}

// serve runs the stack (interpreters, jails, store, engine) with the HTTP
// API on top until ctx ends; teardown runs in reverse order.
func serve(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	// Listen first: a taken port should fail before anything else starts.
	ln, err := net.Listen("tcp", cfg.Addr())
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Addr(), err)
	}
	defer ln.Close()
	return serveOn(ctx, ln, cfg, log, nil)
}

// serveOn serves on ln. ready, if not nil, is closed once the API accepts
// requests (the --local mode waits for it).
func serveOn(ctx context.Context, ln net.Listener, cfg config.Config, log *slog.Logger, ready chan<- struct{}) error {
	// The engine reports finished executions to the API's metrics, which
	// exist only once the API does: the sink bridges the two.
	var sink atomic.Pointer[api.Metrics]
	st, err := startStack(ctx, cfg, log, func(x engine.Execution) {
		if m := sink.Load(); m != nil {
			m.ObserveExecution(&x)
		}
	})
	if err != nil {
		return err
	}
	defer st.close()

	isolation := "jail"
	if cfg.UnsafeNoIsolation {
		isolation = "none (unsafe)"
		log.Warn("running code WITHOUT isolation (--unsafe-no-isolation)")
	}
	opts := api.Options{Config: cfg, Version: buildVersion(), Isolation: isolation,
		Logger: log.With("component", "api"), BaseEnvironment: st.base.String, Store: st.eng.StoreStats}
	if st.pool != nil {
		opts.Collectors = append(opts.Collectors, st.pool.Collector())
	}
	opts.Collectors = append(opts.Collectors, api.SessionCollector(st.eng.SessionStats), api.StoreCollector(st.eng.StoreStats))
	srv, err := api.New(st.eng, opts)
	if err != nil {
		return err
	}
	sink.Store(srv.Metrics())
	log.Info("serving", "addr", ln.Addr().String(), "data_dir", cfg.DataDir, "env_dir", st.envs.Dir(), "installer", st.envs.Installer(),
		"pythons", st.pythons.Versions(), "default_python", st.pythons.Default().Version)
	if ready != nil {
		close(ready)
	}
	return srv.Serve(ctx, ln)
}
