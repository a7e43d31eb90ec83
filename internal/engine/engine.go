package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/pyexec/pyexec/internal/engine/admission"
	"github.com/pyexec/pyexec/internal/engine/fleet"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/engine/sessions"
	"github.com/pyexec/pyexec/internal/store"
)

// Engine runs executions. Create it with New, call Start once, and Close
// it when done.
type Engine struct {
	cfg  Config
	deps Deps
	st   Store
	log  *slog.Logger
	adm  *admission.Gate
	// planner turns requests into plans; lim are the limits it applies.
	planner *run.Planner
	lim     run.Limits

	// base is cancelled (with errShutdown) when Close gives up waiting;
	// async runs derive from it.
	base       context.Context
	cancelBase context.CancelCauseFunc
	// stopping is cancelled as soon as Close is called: the dispatch loop
	// and followers derive from it.
	stopping context.Context
	stop     context.CancelFunc
	wg       sync.WaitGroup // every goroutine the engine started
	// owners counts the executions this node owns (see own): Close waits
	// until each has recorded its final state, sync ones included.
	owners sync.WaitGroup

	// peeks is the semaphore of followers' record reads (follow.go).
	peeks chan struct{}

	mu     sync.Mutex
	owned  map[string]*owner // executions this node runs or holds
	closed bool
	sess   *sessions.Service // this node's live sessions
	gauge  *storeGauge
	// mem is this node's heartbeat and its view of the other nodes
	// (internal/engine/fleet); started says Start succeeded, so Close
	// leaves.
	mem     *fleet.Membership
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
	lim := run.Limits{DefaultTimeout: cfg.DefaultTimeout, MaxTimeout: cfg.MaxTimeout,
		DefaultMemoryBytes: cfg.DefaultMemoryBytes, MaxMemoryBytes: cfg.MaxMemoryBytes,
		DefaultDiskBytes: cfg.DefaultDiskBytes, MaxDiskBytes: cfg.MaxDiskBytes,
		DefaultCPUs: cfg.DefaultCPUs, MinCPUs: cfg.MinCPUs, OutputBytes: cfg.OutputBytes}
	planner, err := run.NewPlanner(run.Config{Limits: lim, AllowNetwork: cfg.AllowNetwork, Network: cfg.Network,
		Collect: deps.Artifacts != nil, MaxFiles: cfg.MaxFiles, MaxFileBytes: cfg.MaxFileBytes},
		run.Deps{Interpreters: deps.Interpreters, Driver: deps.Driver, Envs: deps.Envs, Linter: deps.Linter})
	if err != nil {
		return nil, fmt.Errorf("engine config: %w", err)
	}
	adm, err := admission.New(admission.Config{Concurrency: cfg.Concurrency, QueueSize: cfg.QueueSize,
		MaxRunningPerKey: cfg.MaxRunningPerKey, MaxQueuedPerKey: cfg.MaxQueuedPerKey}, tallyView{deps.Store})
	if err != nil {
		return nil, fmt.Errorf("engine config: %w", err)
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	base, cancel := context.WithCancelCause(context.Background())
	stopping, stop := context.WithCancel(context.Background())
	e := &Engine{
		stopping:   stopping,
		stop:       stop,
		cfg:        cfg,
		deps:       deps,
		st:         deps.Store,
		planner:    planner,
		lim:        lim,
		log:        log,
		adm:        adm,
		base:       base,
		cancelBase: cancel,
		owned:      make(map[string]*owner),
		peeks:      make(chan struct{}, maxPeeks),
		gauge:      newStoreGauge(cfg.StoreMaxBytes),
	}
	e.sess, err = sessions.New(cfg.Sessions, lim, sessions.Deps{Jails: deps.Jails, Forker: deps.Forker,
		Interpreters: deps.Interpreters, Envs: deps.Envs, Logger: log, OnEnd: deps.OnSessionEnd})
	if err != nil {
		return nil, fmt.Errorf("engine config: %w", err)
	}
	e.mem, err = fleet.New(fleet.Config{Node: cfg.Node, Version: cfg.Version, NodeLostAfter: cfg.NodeLostAfter},
		fleet.Deps{Store: deps.Store, Load: e.nodeLoad, Settle: e.settleLost, OnLost: deps.OnNodeLost, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("engine config: %w", err)
	}
	return e, nil
}

// nodeLoad is this node's work, for its heartbeat.
func (e *Engine) nodeLoad() fleet.Load {
	st := e.Stats()
	l := fleet.Load{Capacity: st.Capacity, Running: st.Running, Queued: st.Queued, QueueSize: st.QueueSize,
		Sessions: e.LiveSessions(), SessionCapacity: e.cfg.Sessions.Max}
	if e.deps.WarmJails != nil {
		n := e.deps.WarmJails()
		l.WarmJails = &n
	}
	return l
}

// Start joins the fleet (fleet.Membership.Join: ErrNodeNameInUse when a
// live node has this node's name), recovers what a previous run of the
// server left behind (see recover.go) and starts taking async jobs from
// the queue and watching the other nodes.
func (e *Engine) Start(ctx context.Context) (err error) {
	// Records of a data directory older than the index get their entries
	// first: recovery and listings find records through the index.
	n, err := e.st.Reindex(ctx, describeRecord)
	if err != nil {
		return fmt.Errorf("engine: indexing records: %w", err)
	}
	if n > 0 {
		e.log.Info("indexed records written before the index existed", "count", n)
	}
	// The queue of an earlier version moves to the keys' queues once
	// every record has an index entry (the jobs' owners).
	if n, err := e.st.MigrateQueue(ctx); err != nil {
		return fmt.Errorf("engine: migrating the queue: %w", err)
	} else if n > 0 {
		e.log.Info("moved queued jobs of an earlier version to their keys' queues", "count", n)
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
	if err := e.recover(ctx); err != nil {
		return fmt.Errorf("engine: recovering executions: %w", err)
	}
	e.mu.Lock()
	e.started = true
	e.mu.Unlock()
	e.mem.Run()
	e.sess.Run()
	e.wg.Add(2)
	go func() {
		defer e.wg.Done()
		e.dispatch(e.stopping)
	}()
	go func() {
		defer e.wg.Done()
		e.evictLoop(e.stopping)
	}()
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
	e.stop()
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
	// for another node (see owner.begin).
	e.mu.Lock()
	for _, o := range e.owned {
		o.stopUnstarted()
	}
	e.mu.Unlock()

	done := make(chan struct{})
	go func() {
		// Nothing is added once closed is set: own and hold refuse, and
		// every other Add happens in a goroutine already counted.
		e.wg.Wait()
		e.sess.Wait()
		e.mem.Wait()
		e.owners.Wait()
		close(done)
	}()
	select {
	case <-done:
		e.cancelBase(errShutdown)
		e.sess.Abort()
		return nil
	case <-ctx.Done():
	}
	e.cancelBase(errShutdown)
	e.sess.Abort()
	e.mu.Lock()
	for _, o := range e.owned {
		o.cancel(errShutdown)
	}
	e.mu.Unlock()
	<-done
	return fmt.Errorf("engine: stopped running executions: %w", context.Cause(ctx))
}

// hold counts work that Close must wait for but that starts outside the
// engine's own goroutines (a session starting or restarting, a follower).
// It fails with ErrClosed once Close was called; the returned func ends
// the hold.
func (e *Engine) hold() (func(), error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, ErrClosed
	}
	e.wg.Add(1)
	return e.wg.Done, nil
}

// tallyView reads the fleet's counts from the store's index.
type tallyView struct{ st store.Tally }

func (v tallyView) Running(key string) int { return v.st.Count(string(StatusRunning), key) }
func (v tallyView) Pending(key string) int { return v.st.Count(string(StatusPending), key) }
func (v tallyView) QueuedAsync() ([]string, int) {
	return v.st.AsyncOwners(string(StatusPending))
}

// Stats reports this node's load.
func (e *Engine) Stats() Stats { return e.adm.Stats() }
