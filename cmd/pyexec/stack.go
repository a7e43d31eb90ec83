//go:build linux

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/api"
	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/fleetsess"
	"github.com/pyexec/pyexec/internal/pool"
	"github.com/pyexec/pyexec/internal/preview"
	"github.com/pyexec/pyexec/internal/pyenv"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/snapshot"
	"github.com/pyexec/pyexec/internal/store"
	"github.com/pyexec/pyexec/internal/workspace"
)

var _ engine.Forker = (*pool.Pool)(nil)

// defaultPython is the interpreter used when a request names none and the
// operator did not choose one: python-executor's default, when installed.
const defaultPython = "3.12"

// spareCgroups is how many emptied cgroups of finished executions the jail
// manager keeps for the next ones (sandbox.Config.SpareCgroups): enough for
// the releases and takes of a busy server to overlap.
const spareCgroups = 8

// stack is an engine with everything beneath it: interpreters, the jail
// manager and the store. `serve` puts the HTTP API on top; `--local` runs
// one in-process.
type stack struct {
	eng     *engine.Engine
	pool    *pool.Pool // nil when the warm pool is off
	pythons *pyenv.Interpreters
	envs    *pyenv.Environments
	base    *baseState // what /health reports about the base environment
	tools   *toolset   // uv and ruff, for /health
	jails   *sandbox.Manager
	nats    natsConns // the store's connections, embedded or to a cluster
	// sessions serves the API's sessions across the fleet.
	sessions *fleetsess.Router
	// closers run in reverse order of start; drain is the shutdown's
	// drain context (see shutdown).
	closers []func(drain context.Context) error
	log     *slog.Logger

	engineOnce sync.Once
	engineErr  error
}

// startStack starts the engine on cfg's data dir. While NATS cannot be
// reached or answer, it waits, telling waiting (may be nil) about each
// failed attempt, until ctx ends. onFinish (may be nil) is told about
// every finished execution, onSessionNetwork (may be nil) about every
// network event of a session.
func startStack(ctx context.Context, cfg config.Config, log *slog.Logger, waiting store.WaitFunc, onFinish func(engine.Finished),
	onSessionNetwork func(engine.NetworkEvent)) (_ *stack, err error) {
	s := &stack{log: log}
	defer func() {
		if err != nil {
			s.close(context.Background())
		}
	}()
	popts := pyenv.OptionsFromEnv(os.Getenv)
	popts.Logger = log.With("component", "pyenv")
	popts.Preferred = defaultPython
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("the data directory: %w", err)
	}
	// A restart runs only the interpreters that changed (interp.probeCache).
	popts.CacheFile = filepath.Join(cfg.DataDir, "interpreters.json")
	s.pythons, err = pyenv.Discover(ctx, popts)
	if err != nil {
		return nil, fmt.Errorf("finding python interpreters: %w", err)
	}
	instance, err := instanceName(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	jcfg := sandbox.Config{Unsafe: cfg.UnsafeNoIsolation, CgroupParent: cfg.CgroupParent, Instance: instance,
		SpareCgroups: spareCgroups, Logger: log.With("component", "sandbox")}
	if cfg.Workspaces.Enabled && !cfg.UnsafeNoIsolation && os.Geteuid() == 0 {
		// Every jail gets a slot a workspace can be mounted on (an
		// unprivileged or unisolated server's cannot: Workspaces says why).
		jcfg.WorkspaceSlots = filepath.Join(cfg.DataDir, "workspace-slots")
	}
	if !cfg.UnsafeNoIsolation {
		if err := checkIsolation(jcfg); err != nil {
			return nil, err
		}
	}
	jails, err := sandbox.New(jcfg)
	if err != nil {
		return nil, fmt.Errorf("starting the jail manager (see `pyexec doctor`): %w", err)
	}
	if !cfg.UnsafeNoIsolation {
		// Build one jail now: a host that cannot should fail at start, not
		// on the first request.
		j, err := jails.Prepare(ctx, sandbox.Base{})
		if err != nil {
			return nil, fmt.Errorf("this host cannot build a jail (see `pyexec doctor`; --unsafe-no-isolation runs without one): %w", err)
		}
		if err := j.Close(); err != nil {
			return nil, fmt.Errorf("removing the start-up test jail: %w", err)
		}
	}
	if n, err := jails.Sweep(); err != nil {
		return nil, fmt.Errorf("removing jails left by a previous run: %w", err)
	} else if n > 0 {
		log.Info("removed jails left by a previous run", "count", n)
	}
	s.jails = jails
	// Closed last: wait until every jail removed in the background is
	// gone, then remove the cgroups kept for reuse.
	s.closers = append(s.closers, func(context.Context) error { return jails.Close() })
	var runner engine.Runner = jails
	if cfg.WarmPool && !cfg.UnsafeNoIsolation && cfg.PoolMaxWarm > 0 {
		pc := poolConfig(cfg, log)
		pc.TrustedMount = s.trustedMount
		s.pool = pool.New(jails, pc)
		s.closers = append(s.closers, func(context.Context) error { return s.pool.Close() }) // closed after the engine
		runner = s.pool
	}
	nats, err := connectStore(ctx, cfg, log, waiting)
	if err != nil {
		return nil, err
	}
	s.nats = nats
	s.closers = append(s.closers, func(context.Context) error { return nats.Close() })
	st, err := store.Open(ctx, nats.Conn(), storeConfig(cfg), store.FollowersOn(nats.FollowConn()), store.OnWait(waiting))
	if err != nil {
		return nil, err
	}
	s.sessions, err = fleetsess.New(fleetsess.Config{Node: cfg.Cluster.NodeName, Conn: nats.Conn(), Registry: st, Blobs: st,
		// the membership registry's, once the engine runs
		NodeURL: func(node string) (string, error) { return s.eng.NodeURL(node) },
		Nodes: func() []string {
			var names []string
			for _, n := range s.eng.Nodes() {
				names = append(names, n.Name)
			}
			return names
		},
		// a hibernation snapshot being written is never old enough to sweep
		OrphanAge: max(15*time.Minute, 2*cfg.Sessions.SaveTimeout),
		Logger:    log.With("component", "sessions")})
	if err != nil {
		return nil, err
	}
	// Closed after the engine: its sessions end first (and are marked
	// node_shutdown in the registry), so no request of another node waits.
	s.closers = append(s.closers, func(context.Context) error { return s.sessions.Close() })
	workspaces, err := openWorkspaces(ctx, cfg, st, log.With("component", "workspaces"))
	if err != nil {
		return nil, err
	}
	if workspaces != nil {
		// The collector removes what deleted workspaces, pruned versions and
		// refused writes left, for as long as the server runs.
		gcCtx, stopGC := context.WithCancel(context.WithoutCancel(ctx))
		gcDone := make(chan struct{})
		go func() { defer close(gcDone); workspaces.Collect(gcCtx, workspace.CollectEvery) }()
		s.closers = append(s.closers, func(context.Context) error { stopGC(); <-gcDone; return nil })
	}
	deps := engine.Deps{
		Workspaces:       workspaces,
		WorkspaceMounts:  jails.Workspaces,
		Store:            st,
		Runner:           runner,
		Interpreters:     engine.PyenvInterpreters{Set: s.pythons},
		Driver:           engine.RunnerDriver{},
		Jails:            jails,
		Artifacts:        st,
		Snapshots:        st,
		Logger:           log.With("component", "engine"),
		OnFinish:         onFinish,
		OnSessionNetwork: onSessionNetwork,
		OnSessionEnd:     s.sessions.SessionEnded,
		// Saved at a graceful shutdown, taken back by the next start.
		OnSessionPark: s.sessions.SessionParked,
		// Checkpoints let another node resume a session after a kill -9.
		OnSessionCheckpoint: s.sessions.SessionCheckpointed,
		OnSessionCell:       s.sessions.SessionCells,
		OnNodeLost:          s.sessions.NodeLost, // its sessions end for every client at once
		OnSelfLost:          s.sessions.SelfLost, // declared lost: stop serving what may resume elsewhere
	}
	if s.pool != nil {
		deps.WarmJails = func() int { return s.pool.Stats().Warm }
	}
	if s.pool != nil {
		deps.Forker = s.pool // session kernels fork from the pool's fork servers
	}
	if err := s.startEnvironments(ctx, cfg, jails, &deps); err != nil {
		return nil, err
	}
	ecfg := engineConfig(cfg)
	if ecfg.Snapshots, err = snapshotConfig(cfg); err != nil {
		return nil, err
	}
	if cfg.Preview.Enabled {
		if ecfg.Preview.Key, err = preview.LoadKey(cfg.DataDir); err != nil {
			return nil, err
		}
	}
	if cfg.AllowNetwork {
		if ecfg.Network, err = egressConfig(cfg); err != nil {
			return nil, err
		}
	}
	if cfg.AllowNetwork && cfg.Network.SecretsFile != "" {
		sec, err := setupSecrets(cfg, ecfg.Network)
		if err != nil {
			return nil, err
		}
		ecfg.Secrets, ecfg.TrustBundle = sec.catalog, sec.bundle
		wctx, stopWatch := context.WithCancel(context.Background())
		sec.watch(wctx, log.With("component", "egress"))
		s.closers = append(s.closers, func(context.Context) error { stopWatch(); return nil })
	}
	s.eng, err = engine.New(ecfg, deps)
	if err != nil {
		return nil, err
	}
	if err := s.eng.Start(ctx); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, s.closeEngine)
	if err := s.sessions.Start(ctx, s.eng); err != nil {
		return nil, err
	}
	return s, nil
}

// instanceName names this server's jails after its data directory: a
// restart on the same data sweeps what its predecessor left, and servers on
// other data never touch each other's jails.
func instanceName(dataDir string) (string, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return "", fmt.Errorf("data dir: %w", err)
	}
	sum := sha256.Sum256([]byte(abs))
	return "px" + hex.EncodeToString(sum[:4]), nil
}

// poolConfig sizes the warm pool: warm jails start with the largest limits
// a request may ask for and are tightened at hand-off.
func poolConfig(cfg config.Config, log *slog.Logger) pool.Config {
	ceilings := sandbox.DefaultLimits()
	ceilings.MemoryBytes = int64(cfg.MaxMemoryMB) << 20
	ceilings.WorkspaceBytes = int64(cfg.MaxDiskMB) << 20
	ceilings.CPUs = float64(runtime.NumCPU())
	ceilings.StdoutBytes, ceilings.StderrBytes = cfg.MaxOutputBytes, cfg.MaxOutputBytes
	return pool.Config{
		BaseEnv:        engine.BaseEnv(),
		Ceilings:       ceilings,
		ScratchBytes:   int64(cfg.DefaultDiskMB) << 20,
		Max:            cfg.PoolPerKind,
		MaxWarm:        cfg.PoolMaxWarm,
		Idle:           cfg.PoolIdle,
		ForkServer:     cfg.ForkServer,
		MaxForkServers: cfg.ForkServers,
		Preload:        cfg.Preload,
		Logger:         log.With("component", "pool"),
	}
}

// trustedMount reports whether a jail's mount dir holds only what the
// operator chose (a base environment, an interpreter): only code whose
// mounts all do may fork from a fork server (pool.Config.TrustedMount).
// The environments are set up after the pool, before any request.
func (s *stack) trustedMount(dir string) bool {
	return s.envs != nil && s.envs.OperatorChosen(dir)
}

// checkIsolation refuses to run on a host that lacks a required layer.
func checkIsolation(cfg sandbox.Config) error {
	var missing []string
	for _, c := range sandbox.Probe(cfg) {
		if c.Required && !c.OK {
			missing = append(missing, c.Layer+": "+c.Detail)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("this host cannot isolate payloads (run `pyexec doctor`; --unsafe-no-isolation runs without isolation):\n  %s",
			strings.Join(missing, "\n  "))
	}
	return nil
}

// closeEngine closes the engine once: running executions get until drain
// ends, then are stopped and recorded. Later calls wait for the first and
// return its result.
func (s *stack) closeEngine(drain context.Context) error {
	s.engineOnce.Do(func() { s.engineErr = s.eng.Close(drain) })
	return s.engineErr
}

// close runs the closers in reverse order of start: the engine (draining
// until drain ends), the environment builds, the store, the warm pool and
// its fork servers, the jails released in the background.
func (s *stack) close(drain context.Context) {
	for i := len(s.closers) - 1; i >= 0; i-- {
		err := s.closers[i](drain)
		switch {
		case err == nil || errors.Is(err, context.Canceled):
		case errors.Is(err, errDrainTimeout) || errors.Is(err, errForced):
			s.log.Warn("executions still running were stopped and recorded as failed/node_lost", "why", context.Cause(drain))
		default:
			s.log.Error("shutting down", "err", err)
		}
	}
	s.closers = nil
}

// stop tears the stack down within sd's bounds: close, given until
// killGrace after the drain ended, then a sweep of this instance's jail
// cgroups, which kills and removes anything still there. After a close
// that finished the sweep finds nothing; what it does find is logged.
func (s *stack) stop(sd *shutdown) error {
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		s.close(sd.drain)
	}()
	select {
	case <-closed:
	case <-sd.afterDrain(killGrace):
		s.log.Error("shutdown did not finish in time: killing every jail of this server", "after_drain", killGrace)
	}
	if s.jails == nil {
		return nil
	}
	n, err := s.jails.Sweep()
	if n > 0 {
		s.log.Warn("removed jails still running at exit", "count", n)
	}
	if err != nil {
		return fmt.Errorf("removing this server's jails: %w", err)
	}
	return nil
}

// The fleet's router serves the API's snapshot routes too.
var _ api.SnapshotEngine = (*fleetsess.Router)(nil)

// snapshotConfig is where sessions' snapshots are kept and checked: the
// operator's key, else the one made at the first start in the data
// directory, which also spools snapshots read from the store. A key's
// hibernation snapshots are bounded as its own snapshots are, and at
// least so that all the sessions it may hold on a node hibernate, each as
// large as a snapshot may be.
func snapshotConfig(cfg config.Config) (engine.SnapshotConfig, error) {
	s := cfg.Sessions
	c := engine.SnapshotConfig{MaxBytes: s.SnapshotMaxBytes, QuotaBytes: s.SnapshotQuotaBytes,
		QuotaCount: s.SnapshotQuota, SpoolDir: cfg.DataDir, Spools: s.SnapshotSpools,
		HibernationBytes: max(s.SnapshotQuotaBytes, int64(s.MaxPerKey)*s.SnapshotMaxBytes),
		HibernationCount: max(s.SnapshotQuota, s.MaxPerKey)}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil { // a fleet's node may keep nothing else there
		return c, fmt.Errorf("the data directory: %w", err)
	}
	var err error
	if cfg.Sessions.SnapshotKey != "" {
		c.Key, err = snapshot.ParseKey(cfg.Sessions.SnapshotKey)
	} else {
		c.Key, err = snapshot.LoadKey(cfg.DataDir)
	}
	if err != nil {
		return c, fmt.Errorf("the snapshot key: %w", err)
	}
	return c, nil
}

// engineConfig carries the serve configuration over to the engine.
func engineConfig(cfg config.Config) engine.Config {
	return engine.Config{
		Node:               cfg.Cluster.NodeName,
		Fleet:              cfg.Cluster.External(),
		Version:            buildVersion(),
		NodeLostAfter:      cfg.Members.NodeLostAfter,
		URL:                cfg.NodeURL(),
		Concurrency:        cfg.MaxConcurrency,
		QueueSize:          cfg.QueueSize,
		MaxRunningPerKey:   cfg.Fairness.MaxRunningPerKey,
		MaxQueuedPerKey:    cfg.Fairness.MaxQueuedPerKey,
		AllowNetwork:       cfg.AllowNetwork,
		DefaultTimeout:     cfg.DefaultTimeout,
		MaxTimeout:         cfg.MaxTimeout,
		DefaultMemoryBytes: int64(cfg.DefaultMemoryMB) << 20,
		MaxMemoryBytes:     int64(cfg.MaxMemoryMB) << 20,
		DefaultDiskBytes:   int64(cfg.DefaultDiskMB) << 20,
		MaxDiskBytes:       int64(cfg.MaxDiskMB) << 20,
		OutputBytes:        cfg.MaxOutputBytes,
		Sessions: engine.SessionConfig{
			Max: cfg.Sessions.Max, MaxPerCaller: cfg.Sessions.MaxPerKey,
			DefaultIdle: cfg.Sessions.IdleTimeout, MaxIdle: cfg.Sessions.MaxIdleTimeout,
			DefaultLifetime: cfg.Sessions.Lifetime, MaxLifetime: cfg.Sessions.MaxLifetime,
			DefaultMemoryBytes: int64(cfg.Sessions.MemoryMB) << 20,
			HibernateAfter:     cfg.Sessions.HibernateAfter,
			CheckpointEvery:    cfg.Sessions.CheckpointEvery,
			SaveTimeout:        cfg.Sessions.SaveTimeout,
			Hibernations:       cfg.Sessions.Hibernations,
			// the sessions' saves at shutdown leave a third of the
			// drain to the rest of the stop
			ParkTimeout: cfg.ShutdownTimeout * 2 / 3,
		},
		Preview:       engine.PreviewConfig{Enabled: cfg.Preview.Enabled, TTL: cfg.Preview.TTL},
		MaxFiles:      cfg.MaxCollectFiles,
		MaxFileBytes:  cfg.MaxCollectBytes,
		StoreMaxBytes: cfg.StoreMaxBytes,
	}
}
