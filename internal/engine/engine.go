// Package engine is the façade the HTTP API, the MCP server and the CLI's
// --local mode call: one Engine per node. It owns who may do what (Caller
// and the ownership check every call that reads or changes an execution
// or a session passes, tenancy.go, with the audit of callers' actions),
// the one Config (validated once and handed to the parts) and the wiring
// of the parts, each a package of its own:
//
//	admission    this node's slots, the per-key fair lines and quotas
//	executions   the lifecycle of executions: records, queue, run, outcome, follow
//	sessions     this node's stateful sessions
//	fleet        membership: heartbeats, the node list, lost nodes
//	run          what executions and sessions share: the vocabulary and the plan
//
// It knows nothing about HTTP, and holds no logic of its own beyond
// authorization and wiring: a call is checked here, then handed to the
// part that owns it. Its types are the parts' (engine.Request is
// run.Request...), so callers need import only this package.
package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/pyexec/pyexec/internal/engine/admission"
	"github.com/pyexec/pyexec/internal/engine/executions"
	"github.com/pyexec/pyexec/internal/engine/fleet"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/engine/sessions"
	"github.com/pyexec/pyexec/internal/engine/snapshots"
	"github.com/pyexec/pyexec/internal/preview"
)

// Engine runs this node's executions and sessions. Create it with New,
// call Start once, and Close it when done.
type Engine struct {
	cfg  Config
	deps Deps
	st   Store
	log  *slog.Logger

	adm  *admission.Gate
	exec *executions.Service
	sess *sessions.Service
	// snaps keeps the sessions' snapshots (disabled without a store).
	snaps *snapshots.Service
	// shares are the preview URLs issued; nil with previews off.
	shares *preview.Shares
	// mem is this node's heartbeat and its view of the other nodes.
	mem *fleet.Membership

	mu     sync.Mutex
	closed bool
	// started says Start succeeded, so Close leaves the fleet.
	started bool
}

// Stats is a snapshot of this node's load.
type Stats = admission.Stats

// New validates cfg and deps and returns an engine that does nothing until
// Start.
func New(cfg Config, deps Deps) (*Engine, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := deps.validate(); err != nil {
		return nil, err
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{cfg: cfg, deps: deps, st: deps.Store, log: log}
	var err error
	e.adm, err = admission.New(admission.Config{Concurrency: cfg.Concurrency, QueueSize: cfg.QueueSize,
		MaxRunningPerKey: cfg.MaxRunningPerKey, MaxQueuedPerKey: cfg.MaxQueuedPerKey}, executions.Tally{Store: deps.Store})
	if err != nil {
		return nil, fmt.Errorf("engine config: %w", err)
	}
	e.exec, err = executions.New(executions.Config{Run: cfg.runConfig(), Node: cfg.Node, Fleet: cfg.Fleet,
		FlushInterval: cfg.FlushInterval, FlushBytes: cfg.FlushBytes, KillWait: cfg.KillWait,
		StoreMaxBytes: cfg.StoreMaxBytes, EvictInterval: cfg.EvictInterval},
		executions.Deps{Store: deps.Store, Runner: deps.Runner, Interpreters: deps.Interpreters, Driver: deps.Driver,
			Envs: deps.Envs, Linter: deps.Linter, Artifacts: deps.Artifacts, Workspaces: deps.Workspaces, Slots: e.adm, Alive: e.NodeAlive,
			Logger: log, OnFinish: deps.OnFinish})
	if err != nil {
		return nil, fmt.Errorf("engine config: %w", err)
	}
	if e.snaps, err = newSnapshots(cfg.Snapshots, deps.Snapshots, log); err != nil {
		return nil, fmt.Errorf("engine config: %w", err)
	}
	if e.shares, err = newShares(cfg.Preview, cfg.Node); err != nil {
		return nil, fmt.Errorf("engine config: %w", err)
	}
	// Sessions plan their network as executions do: the same operator
	// configuration, the same checks.
	netPlanner, err := run.NewPlanner(cfg.runConfig(), run.Deps{Interpreters: deps.Interpreters, Driver: deps.Driver})
	if err != nil {
		return nil, fmt.Errorf("engine config: %w", err)
	}
	var v sessions.Vault
	if e.snaps.Enabled() {
		v = vault{e.snaps}
	}
	e.sess, err = sessions.New(cfg.Sessions, cfg.runConfig().Limits, sessions.Deps{Jails: deps.Jails, Workspaces: deps.Workspaces,
		Forker: deps.Forker, Interpreters: deps.Interpreters, Envs: deps.Envs, Logger: log, Vault: v,
		Network: netPlanner, OnNetworkEvent: deps.OnSessionNetwork, OnSecretEvent: e.auditSessionSecret,
		OnEnd: e.forgetShares(deps.OnSessionEnd), OnPark: deps.OnSessionPark,
		OnCheckpoint: deps.OnSessionCheckpoint, OnCell: deps.OnSessionCell})
	if err != nil {
		return nil, fmt.Errorf("engine config: %w", err)
	}
	e.mem, err = fleet.New(fleet.Config{Node: cfg.Node, Version: cfg.Version, NodeLostAfter: cfg.NodeLostAfter, URL: cfg.URL},
		fleet.Deps{Store: deps.Store, Load: e.nodeLoad, Settle: e.exec.SettleLost, OnLost: deps.OnNodeLost,
			OnSelfLost: deps.OnSelfLost, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("engine config: %w", err)
	}
	return e, nil
}

// Start indexes the records an older version left without index entries,
// joins the fleet (ErrNodeNameInUse when a live node has this node's
// name), recovers what a previous run of the server left behind, and
// starts taking async jobs from the queue, watching the other nodes and
// reaping idle sessions.
func (e *Engine) Start(ctx context.Context) (err error) {
	if err := e.exec.Index(ctx); err != nil {
		return err
	}
	if err := e.mem.Join(ctx); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			e.mem.Stop()
			e.mem.Leave()
		}
	}()
	if err := e.exec.Recover(ctx); err != nil {
		return fmt.Errorf("engine: recovering executions: %w", err)
	}
	e.mu.Lock()
	e.started = true
	e.mu.Unlock()
	e.mem.Run()
	e.exec.Run()
	e.sess.Run()
	return nil
}

// Close stops admitting and dispatching and ends every session, then waits
// for running executions (sync and async) to finish until ctx ends.
// Executions still running then are stopped and recorded as failed with
// reason node_lost; queued async jobs stay in the queue for another node
// or the next start (a job taken but not started is handed back at once).
// Close returns once every execution it owned has its final record and
// every jail it started (sessions' included) is gone. Meanwhile the node's
// heartbeat says it is draining; at the end its entry is removed, so the
// other nodes drop it at once instead of declaring it lost.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	e.closed = true
	started := e.started
	e.mu.Unlock()
	e.adm.Close()
	e.exec.Close()
	e.sess.Close()
	e.mem.Stop()
	if started {
		// Said at once: the other nodes stop sending work here while
		// this node finishes what it runs; then it leaves.
		e.mem.Drain()
		defer e.mem.Leave()
	}
	// Executions that have not begun are stopped now: sync callers still
	// waiting for a slot fail (node_lost), async jobs stay in the queue
	// for another node.
	e.exec.StopUnstarted()

	done := make(chan struct{})
	go func() {
		e.exec.Wait()
		e.sess.Wait()
		e.mem.Wait()
		close(done)
	}()
	select {
	case <-done:
		e.abort()
		return nil
	case <-ctx.Done():
	}
	e.abort()
	<-done
	return fmt.Errorf("engine: stopped running executions: %w", context.Cause(ctx))
}

// abort ends what still runs: executions (failed, node_lost) and the
// sessions' kernels.
func (e *Engine) abort() {
	e.exec.Abort()
	e.sess.Abort()
}

// nodeLoad is this node's work, for its heartbeat.
func (e *Engine) nodeLoad() fleet.Load {
	st := e.Stats()
	l := fleet.Load{Capacity: st.Capacity, Running: st.Running, Queued: st.Queued, QueueSize: st.QueueSize,
		Sessions: e.sess.Live(), SessionCapacity: e.sess.Cap()}
	if e.deps.WarmJails != nil {
		n := e.deps.WarmJails()
		l.WarmJails = &n
	}
	return l
}

// NodeAlive reports whether the fleet saw node's heartbeat lately and
// did not declare it lost.
func (e *Engine) NodeAlive(node string) bool { return e.mem.NodeAlive(node) }

// Stats reports this node's load.
func (e *Engine) Stats() Stats { return e.adm.Stats() }
