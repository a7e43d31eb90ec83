package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/pyexec/pyexec/internal/api"
	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/pyenv"
	"github.com/pyexec/pyexec/internal/runner"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/store"
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

// serve wires interpreters, jail, store, engine and HTTP API together and
// runs until ctx ends; teardown runs in reverse order (HTTP, engine, store).
func serve(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	// Listen first: a taken port should fail before anything else starts.
	ln, err := net.Listen("tcp", cfg.Addr())
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Addr(), err)
	}
	defer ln.Close()

	popts := pyenv.OptionsFromEnv(os.Getenv)
	popts.Logger = log.With("component", "pyenv")
	pythons, err := pyenv.Discover(ctx, popts)
	if err != nil {
		return fmt.Errorf("finding python interpreters: %w", err)
	}
	jails, err := sandbox.New(sandbox.Config{Unsafe: cfg.UnsafeNoIsolation, Logger: log.With("component", "sandbox")})
	if err != nil {
		return fmt.Errorf("starting the jail manager (see `pyexec doctor`): %w", err)
	}
	if n, err := jails.Sweep(); err != nil {
		return fmt.Errorf("removing jails left by a previous run: %w", err)
	} else if n > 0 {
		log.Info("removed jails left by a previous run", "count", n)
	}

	nats, err := store.StartEmbedded(ctx, cfg.DataDir, log)
	if err != nil {
		return err
	}
	defer closeLogged(log, "store", nats.Close)
	st, err := store.Open(ctx, nats.Conn(), store.Config{TTL: cfg.RecordTTL})
	if err != nil {
		return err
	}

	eng, err := engine.New(engineConfig(cfg), engine.Deps{
		Store:        st,
		Runner:       jails,
		Interpreters: interpreters{pythons},
		Driver:       driver{},
		Logger:       log.With("component", "engine"),
	})
	if err != nil {
		return err
	}
	if err := eng.Start(ctx); err != nil {
		return err
	}
	defer closeLogged(log, "engine", func() error {
		cctx, cancel := context.WithTimeout(context.Background(), engineDrainTimeout)
		defer cancel()
		return eng.Close(cctx)
	})

	isolation := "jail"
	if cfg.UnsafeNoIsolation {
		isolation = "none (unsafe)"
		log.Warn("running code WITHOUT isolation (--unsafe-no-isolation)")
	}
	srv, err := api.New(eng, api.Options{Config: cfg, Version: buildVersion(), Isolation: isolation, Logger: log.With("component", "api")})
	if err != nil {
		return err
	}
	log.Info("serving", "addr", ln.Addr().String(), "data_dir", cfg.DataDir, "pythons", pythons.Versions())
	return srv.Serve(ctx, ln)
}

// engineConfig carries the serve configuration over to the engine.
func engineConfig(cfg config.Config) engine.Config {
	return engine.Config{
		Concurrency:        cfg.MaxConcurrency,
		QueueSize:          cfg.QueueSize,
		AllowNetwork:       cfg.AllowNetwork,
		DefaultTimeout:     cfg.DefaultTimeout,
		MaxTimeout:         cfg.MaxTimeout,
		DefaultMemoryBytes: int64(cfg.DefaultMemoryMB) << 20,
		MaxMemoryBytes:     int64(cfg.MaxMemoryMB) << 20,
		DefaultDiskBytes:   int64(cfg.DefaultDiskMB) << 20,
		MaxDiskBytes:       int64(cfg.MaxDiskMB) << 20,
		OutputBytes:        cfg.MaxOutputBytes,
	}
}

// closeLogged runs a teardown step whose error can only be reported.
func closeLogged(log *slog.Logger, what string, close func() error) {
	if err := close(); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("shutting down "+what, "err", err)
	}
}

// buildVersion is the module version the binary was built from.
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// interpreters adapts pyenv's interpreter set to engine.Interpreters.
type interpreters struct{ set *pyenv.Interpreters }

func (i interpreters) Lookup(version string) (engine.Interpreter, error) {
	in, err := i.set.Lookup(version)
	if err != nil {
		return engine.Interpreter{}, err
	}
	return engine.Interpreter{Version: in.Full, Path: in.Path, Mounts: in.Mounts}, nil
}

// driver adapts the runner package to engine.Driver.
type driver struct{}

func (driver) Argv(python, entrypoint string, opts engine.DriverOptions) []string {
	return runner.Argv(python, runner.Options{Entrypoint: entrypoint, Args: opts.Args, EvalLastExpr: opts.EvalLastExpr})
}

func (driver) Parse(report []byte) (engine.Report, error) {
	r, err := runner.ParseReport(report)
	if err != nil {
		return engine.Report{}, err
	}
	out := engine.Report{Result: r.Result}
	if r.Error != nil {
		out.ErrorType, out.ErrorLine, out.Error = r.Error.Name, r.Error.Line, r.Error.Value
	}
	return out, nil
}
