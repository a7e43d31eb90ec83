package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
)

// Engine runs executions. Create it with New, call Start once, and Close
// it when done.
type Engine struct {
	cfg  Config
	deps Deps
	st   Store
	log  *slog.Logger
	adm  *admission

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
	sess   *sessions // this node's live sessions (session*.go)
	gauge  *storeGauge
}

// Stats is a snapshot of this node's load.
type Stats struct {
	Running   int // executions running now
	Queued    int // admitted, not yet running (sync waiters + async jobs)
	Capacity  int // Config.Concurrency
	QueueSize int // Config.QueueSize
}

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
	base, cancel := context.WithCancelCause(context.Background())
	stopping, stop := context.WithCancel(context.Background())
	return &Engine{
		stopping:   stopping,
		stop:       stop,
		cfg:        cfg,
		deps:       deps,
		st:         deps.Store,
		log:        log,
		adm:        newAdmission(cfg.Concurrency, cfg.QueueSize, cfg.MaxRunningPerKey, cfg.MaxQueuedPerKey),
		base:       base,
		cancelBase: cancel,
		owned:      make(map[string]*owner),
		peeks:      make(chan struct{}, maxPeeks),
		sess:       newSessions(),
		gauge:      newStoreGauge(cfg.StoreMaxBytes),
	}, nil
}

// Start recovers what a previous run of the server left behind (see
// recover.go) and starts taking async jobs from the queue.
func (e *Engine) Start(ctx context.Context) error {
	// Records of a data directory older than the index get their entries
	// first: recovery and listings find records through the index.
	n, err := e.st.Reindex(ctx, describeRecord)
	if err != nil {
		return fmt.Errorf("engine: indexing records: %w", err)
	}
	if n > 0 {
		e.log.Info("indexed records written before the index existed", "count", n)
	}
	if err := e.recover(ctx); err != nil {
		return fmt.Errorf("engine: recovering executions: %w", err)
	}
	depth, err := e.st.QueueDepth(ctx)
	if err != nil {
		return fmt.Errorf("engine: reading queue depth: %w", err)
	}
	e.adm.setQueued(int(depth))
	e.wg.Add(3)
	go func() {
		defer e.wg.Done()
		e.dispatch(e.stopping)
	}()
	go func() {
		defer e.wg.Done()
		e.evictLoop(e.stopping)
	}()
	go func() {
		defer e.wg.Done()
		e.reapSessions(e.stopping)
	}()
	return nil
}

// Close stops admitting and dispatching and ends every session, then waits
// for running executions (sync and async) to finish until ctx ends.
// Executions still running then are stopped and recorded as failed with
// reason node_lost; queued async jobs stay in the queue for the next start.
// Close returns once every execution it owned has its final record and
// every jail it started (sessions' included) is gone.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	e.closed = true
	e.mu.Unlock()
	e.adm.close()
	e.stop()
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
		e.owners.Wait()
		close(done)
	}()
	select {
	case <-done:
		e.cancelBase(errShutdown)
		return nil
	case <-ctx.Done():
	}
	e.cancelBase(errShutdown)
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

// Stats reports this node's load.
func (e *Engine) Stats() Stats {
	running, queued := e.adm.stats()
	return Stats{Running: running, Queued: queued, Capacity: e.cfg.Concurrency, QueueSize: e.cfg.QueueSize}
}
