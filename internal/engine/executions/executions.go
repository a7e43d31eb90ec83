package executions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/engine/admission"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/store"
	"github.com/pyexec/pyexec/internal/workspace"
)

// Config is the operator's configuration of this node's executions. Zero
// fields take the defaults documented on each.
type Config struct {
	// Run says what a run may be: limits, network, file collection.
	Run run.Config
	// Node names this node; the record of every execution it runs says
	// so (Execution.Node). Required.
	Node string
	// Fleet says that other nodes share the store (pyexec serve --nats).
	// A single node (false, the embedded server) may take back at start
	// the queued jobs a previous run of it took and did not start; in a
	// fleet those may be live nodes' jobs, so they come back only after
	// the queue's ack wait. A sync execution without a free slot here
	// waits in the fleet's queue rather than in line on this node.
	Fleet bool
	// FlushInterval and FlushBytes coalesce live output into events: a
	// chunk is published every FlushInterval or once FlushBytes are
	// pending. FlushBytes is also the most one stdout or stderr event
	// carries, which bounds what a follower holds. Defaults 50ms and
	// 16 KiB (with 32 KiB, 60 followers of a loud execution cost about
	// 10 MiB more peak RSS, see bench/followers); FlushBytes at most 1 MiB.
	FlushInterval time.Duration
	FlushBytes    int
	// KillWait bounds how long Kill waits for the node running an
	// execution to stop it and record the outcome. Default 10s.
	KillWait time.Duration
	// StoreMaxBytes caps what the shared store holds (records, index,
	// events, request payloads, artifacts); above it the oldest finished
	// executions are evicted (evict.go). Zero: no cap, records only expire.
	StoreMaxBytes int64
	// EvictInterval is how often the store is measured (also after every
	// execution that ends). Default 10s.
	EvictInterval time.Duration
	// OrphanSweep is how often this node looks for its unfinished records
	// that none of its executions owns (orphans.go); one found at two
	// sweeps in a row is settled. Default 1m.
	OrphanSweep time.Duration
}

// maxFlushBytes bounds Config.FlushBytes, the size of an output event.
const maxFlushBytes = 1 << 20

func (c Config) withDefaults() Config {
	setDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	setDur(&c.FlushInterval, 50*time.Millisecond)
	if c.FlushBytes == 0 {
		c.FlushBytes = 16 << 10
	}
	setDur(&c.KillWait, 10*time.Second)
	setDur(&c.EvictInterval, 10*time.Second)
	setDur(&c.OrphanSweep, time.Minute)
	return c
}

func (c Config) validate() error {
	checks := []struct {
		bad bool
		msg string
	}{
		{c.Node == "", "a node name is required"},
		{c.FlushInterval < time.Millisecond || c.FlushBytes < 1, "event flush interval and size must be positive"},
		{c.FlushBytes > maxFlushBytes, "event flush size must be at most 1 MiB"},
		{c.KillWait < 10*time.Millisecond, "kill wait must be at least 10ms"},
		{c.StoreMaxBytes < 0, "store size limit must not be negative"},
		{c.EvictInterval < 10*time.Millisecond, "eviction interval must be at least 10ms"},
		{c.OrphanSweep < 10*time.Millisecond, "orphan sweep interval must be at least 10ms"},
	}
	for _, ch := range checks {
		if ch.bad {
			return errors.New(ch.msg)
		}
	}
	return nil
}

// Runner runs one payload in a jail; *sandbox.Manager and *pool.Pool
// implement it. It must stop the payload promptly once ctx is cancelled.
type Runner interface {
	Run(ctx context.Context, spec sandbox.Spec, out sandbox.OutputFunc) (sandbox.Result, error)
}

// Store is the shared state executions run on; *store.NATS implements it.
type Store interface {
	store.Records
	store.Requests
	store.Queue
	store.Tally
	store.Events
	store.Control
	store.Audit
	store.EventReader
	store.Capacity
}

// Slots is the admission executions run under; *admission.Gate
// implements it.
type Slots interface {
	// TrySync takes a free slot of key's for a sync execution, or none.
	TrySync(key string) (*admission.Ticket, error)
	// EnterSync takes a slot of key's or a place in its line.
	EnterSync(key string) (*admission.Ticket, error)
	// ReserveAsync counts job id about to be queued, Submitted ends that
	// count, Queued says one was queued.
	ReserveAsync(key, id string) error
	Submitted(key, id string)
	Queued()
	// Claim takes a slot for a queued job and names the keys to try;
	// Unclaim gives it back, StartAsync makes it key's.
	Claim() (keys []string, changed <-chan struct{})
	Unclaim()
	StartAsync(key string) *admission.Ticket
	// Poke grants what the fleet's counts allow now.
	Poke()
}

var _ Slots = (*admission.Gate)(nil)

// Deps are the collaborators of executions. Store, Runner, Interpreters,
// Driver, Slots and Alive are required.
type Deps struct {
	Store        Store
	Runner       Runner
	Interpreters run.Interpreters
	Driver       run.Driver
	// Envs resolves and installs dependencies; nil refuses requests
	// with requirements and detects nothing.
	Envs run.Environments
	// Linter serves lint requests; nil refuses them.
	Linter run.Linter
	// Artifacts stores the files executions produce; nil collects none.
	Artifacts store.Artifacts
	// Workspaces keeps the workspaces runs mount (docs/workspaces.md);
	// nil fails a run that names one.
	Workspaces *workspace.Manager
	// Slots admits executions to this node's slots.
	Slots Slots
	// Alive reports whether a node of the fleet is alive (its heartbeat
	// was seen lately); this node is.
	Alive  func(node string) bool
	Logger *slog.Logger // nil discards
	// OnFinish, if set, is told about every execution this node ends (for
	// metrics). It gets a copy and must not block.
	OnFinish func(Finished)
}

// Finished is what OnFinish is told of an execution that ended: its
// record, the caller that owns it and the stdout and stderr bytes it
// kept (the record's Stdout and Stderr may be empty when the output is
// kept in its events).
type Finished struct {
	run.Execution
	Owner       string
	OutputBytes int64
}

// Service runs this node's executions. Build it with New; Index, Recover
// and Run it; Close, StopUnstarted, Wait and Abort it when the engine
// stops.
type Service struct {
	cfg     Config
	deps    Deps
	st      Store
	log     *slog.Logger
	slots   Slots
	planner *run.Planner

	// base is cancelled (with errShutdown) by Abort; async runs and lint
	// derive from it.
	base       context.Context
	cancelBase context.CancelCauseFunc
	// stopping is cancelled by Close: the dispatch and eviction loops
	// and followers derive from it.
	stopping context.Context
	stop     context.CancelFunc
	wg       sync.WaitGroup // every goroutine the service started, and holds
	// owners counts the executions this node owns (see own): Wait waits
	// until each has recorded its final state, sync ones included.
	owners sync.WaitGroup
	// teardowns are the egresses of finished executions being torn
	// down after their answers; Wait waits for them.
	teardowns *teardowns

	// peeks is the semaphore of followers' record reads (follow.go).
	peeks chan struct{}

	mu    sync.Mutex
	owned map[string]*owner // executions this node runs or holds
	// unconfirmed holds the ids of records whose creation timed out and
	// could not be undone: stored, they would have no index entry for
	// the orphan sweep to list them by (orphans.go).
	unconfirmed map[string]bool
	closed      bool
	gauge       *storeGauge
}

// New applies the defaults to cfg, checks it and deps and returns the
// service, which runs nothing until Run (a sync execution runs at once).
func New(cfg Config, deps Deps) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if deps.Store == nil || deps.Runner == nil || deps.Interpreters == nil || deps.Driver == nil ||
		deps.Slots == nil || deps.Alive == nil {
		return nil, errors.New("engine: Store, Runner, Interpreters, Driver, Slots and Alive are required")
	}
	cfg.Run.Collect = deps.Artifacts != nil
	planner, err := run.NewPlanner(cfg.Run, run.Deps{Interpreters: deps.Interpreters, Driver: deps.Driver,
		Envs: deps.Envs, Linter: deps.Linter})
	if err != nil {
		return nil, err
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	base, cancel := context.WithCancelCause(context.Background())
	stopping, stop := context.WithCancel(context.Background())
	return &Service{
		cfg:         cfg,
		deps:        deps,
		st:          deps.Store,
		log:         log,
		slots:       deps.Slots,
		planner:     planner,
		base:        base,
		cancelBase:  cancel,
		stopping:    stopping,
		stop:        stop,
		owned:       make(map[string]*owner),
		unconfirmed: make(map[string]bool),
		peeks:       make(chan struct{}, maxPeeks),
		teardowns:   newTeardowns(log),
		gauge:       newStoreGauge(cfg.StoreMaxBytes),
	}, nil
}

// Index gives the records of a data directory older than the index their
// entries (recovery and listings find records through the index), then
// moves the queue of an earlier version to the keys' queues.
func (e *Service) Index(ctx context.Context) error {
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
	return nil
}

// Run starts taking async jobs from the queue, measuring (and evicting
// from) the store and settling this node's executions that nothing owns,
// until Close.
func (e *Service) Run() {
	for _, loop := range []func(context.Context){e.dispatch, e.evictLoop, e.orphanLoop} {
		e.wg.Go(func() { loop(e.stopping) })
	}
}

// Close refuses new executions and followers and stops the loops Run
// started; what runs goes on (StopUnstarted, Wait, Abort).
func (e *Service) Close() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.stop()
}

// StopUnstarted stops the executions that have not begun: sync callers
// still waiting for a slot fail (node_lost), async jobs stay in the queue
// for another node (see owner.begin).
func (e *Service) StopUnstarted() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, o := range e.owned {
		o.stopUnstarted()
	}
}

// Wait waits until every execution this node owned has its final record
// and every goroutine the service started has returned (but egress
// teardowns Abort gave up on). Nothing is added
// once Close was called: own and hold refuse, and every other Add happens
// in a goroutine already counted.
func (e *Service) Wait() {
	e.wg.Wait()
	e.owners.Wait()
	// Every execution has its record: no teardown starts any more.
	e.teardowns.wait()
}

// Abort stops what still runs: the executions end failed with reason
// node_lost, as their node is going away; Wait no longer waits for the
// egress teardowns left after executions' answers (teardowns).
func (e *Service) Abort() {
	e.cancelBase(errShutdown)
	e.teardowns.giveUp()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, o := range e.owned {
		o.cancel(errShutdown)
	}
}

// hold counts work that Wait must wait for but that starts outside the
// service's own goroutines (a follower). It fails with run.ErrClosed once
// Close was called; the returned func ends the hold.
func (e *Service) hold() (func(), error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, run.ErrClosed
	}
	e.wg.Add(1)
	return e.wg.Done, nil
}
