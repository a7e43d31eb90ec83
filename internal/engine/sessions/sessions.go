package sessions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/pyexec/pyexec/internal/egress"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/pyenv"
	"github.com/pyexec/pyexec/internal/runner"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/workspace"
)

// Deps are the collaborators of sessions.
type Deps struct {
	// Jails hosts sessions; nil refuses them (ErrDisabled).
	Jails Jails
	// Workspaces keeps the workspaces sessions mount; nil refuses a
	// session that names one.
	Workspaces *workspace.Manager
	// Forker, if set, forks session kernels from fork servers (Jails
	// still hosts those that do not fork).
	Forker       Forker
	Interpreters run.Interpreters
	// Envs resolves and installs requirements; nil refuses sessions with
	// requirements.
	Envs   run.Environments
	Logger *slog.Logger // nil discards
	// Network plans the network of sessions that ask for it; nil refuses
	// them. OnNetworkEvent, if set, is told each of their network events
	// (for metrics); it must not block.
	Network        NetworkPlanner
	OnNetworkEvent func(egress.Event)
	// OnSecretEvent, if set, is told each network event of a session
	// that names a secret (an injection, a placeholder refused), with the
	// session's id and owner: the server's audit trail.
	OnSecretEvent func(sessionID, owner string, ev egress.Event)
	// Vault keeps the snapshots sessions are saved as; nil refuses
	// snapshots (ErrNoSnapshots).
	Vault Vault
	// OnEnd, if set, is told the id of every session that ends, and
	// whether it ended because the service shuts down. It runs on the
	// goroutine that ends the session.
	OnEnd func(id string, shutdown bool)
	// OnPark, if set, is told of every session saved at shutdown for the
	// next run of this node (park.go), which it must record for Adopt;
	// without it, every session ends at shutdown.
	// An error says the park was not recorded: the session's checkpoint
	// is then kept (the record still names it).
	OnPark func(p Parked) error
	// OnCheckpoint, if set, is told of every checkpoint a session was
	// saved as (checkpoint.go), which it must record for the fleet to
	// resume the session from if this node is lost; OnCell of the count
	// of cells each session that has a checkpoint ran, after each cell.
	// Both must be cheap (OnCell runs before the cell's answer). An error
	// from OnCheckpoint says the checkpoint was not recorded (or this
	// node no longer holds the session): the new one is deleted and the
	// recorded one kept.
	OnCheckpoint func(c Checkpoint) error
	OnCell       func(id string, cells int)
}

// Service holds this node's live sessions. Build it with New, Run it, and
// Close, Wait and Abort it when the engine stops.
type Service struct {
	cfg  Config
	lim  run.Limits
	deps Deps
	log  *slog.Logger

	// base bounds every kernel's life: Abort cancels it. stopping ends
	// the reaper, which then ends every session (Close).
	base       context.Context
	cancelBase context.CancelFunc
	stopping   context.Context
	stop       context.CancelFunc
	// wg counts the reaper, the kernels' watchers and the calls that hold
	// the service (hold); shut refuses new holds.
	wg     sync.WaitGroup
	holdMu sync.Mutex
	shut   bool

	mu     sync.Mutex
	live   map[string]*Live // the registry
	closed bool             // the reaper ended every session: no more
	// parked are the sessions this run's shutdown saved for the next
	// (park.go), as they were: until the process ends, a call on one is
	// "retry later", not "not found", and a listing shows it.
	parked map[string]Session

	// hibSlots holds a token per hibernation under way
	// (Config.Hibernations).
	hibSlots chan struct{}
	hibWG    sync.WaitGroup // the hibernation workers
	// ckptSlots holds a token per checkpoint under way (checkpointSlots).
	ckptSlots chan struct{}
	counts    counts
}

// counts are the service's running totals (Stats).
type counts struct {
	hibernated, hibernateFailed, hibernateEnded, resumed, resumeFailed atomic.Int64
}

// New applies the defaults to cfg and lim, checks cfg and returns the
// service, which reaps nothing until Run.
func New(cfg Config, lim run.Limits, deps Deps) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	base, cancelBase := context.WithCancel(context.Background())
	stopping, stop := context.WithCancel(context.Background())
	return &Service{cfg: cfg, lim: lim.WithDefaults(), deps: deps, log: log, base: base, cancelBase: cancelBase,
		stopping: stopping, stop: stop, live: make(map[string]*Live),
		parked: make(map[string]Session), hibSlots: make(chan struct{}, cfg.Hibernations),
		ckptSlots: make(chan struct{}, checkpointSlots)}, nil
}

// Run starts reaping idle and expired sessions.
func (m *Service) Run() {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.reapSessions(m.stopping)
	}()
}

// Close refuses new sessions and restarts and ends every session.
func (m *Service) Close() {
	m.holdMu.Lock()
	m.shut = true
	m.holdMu.Unlock()
	m.stop()
}

// Wait waits until every session has ended and every call that held the
// service returned.
func (m *Service) Wait() { m.wg.Wait() }

// Abort ends the kernels' contexts: what Wait waits for ends at once.
func (m *Service) Abort() { m.cancelBase() }

// hold counts a call that starts a kernel (a create, a restart): Wait
// waits for it. It fails with run.ErrClosed once Close was called; the
// returned func ends the hold.
func (m *Service) hold() (func(), error) {
	m.holdMu.Lock()
	defer m.holdMu.Unlock()
	if m.shut {
		return nil, run.ErrClosed
	}
	m.wg.Add(1)
	return m.wg.Done, nil
}

// Live is one live session. Its kernel changes on restart.
type Live struct {
	id, caller string
	python     string // the interpreter's version
	interp     run.Interpreter
	spec       sandbox.Spec
	// net is the network plan of the current (or next) kernel, its
	// secrets' placeholders those in spec.Env; use is the session's
	// network over its life (nil without network).
	net run.NetPlan
	use *netUse
	// release gives back the environment lease, and commits the
	// workspace (endWorkspace). envPending says that the spec has no
	// environment yet (prepareEnv): a session adopted from an earlier run
	// leases it at its first resume. Both change under mu, before the
	// first kernel.
	release    func()
	envPending bool
	// startForks says that a kernel may start the fork server it forks
	// from: its environment is the base's (or the bare interpreter). A
	// session with requirements of its own forks only from a server its
	// layered environment already has, else it starts cold.
	startForks bool
	// req is the request the session was made with (a snapshot keeps it,
	// a fork repeats it); life its lifetime.
	req        Request
	idle, life time.Duration
	created    time.Time
	expires    time.Time

	// run serialises cells, restarts and the end of the session.
	run sync.Mutex

	mu sync.Mutex
	// preparing: a call waits for the environment (readyEnv); the
	// session is not idle meanwhile. Not busy: a shutdown parks it.
	preparing bool
	k         *kernel
	count     int
	busy      bool
	last      time.Time
	restarts  int
	gone      bool // deleted or reaped: no longer in the registry
	// from says where the session's first state came from: a snapshot
	// restored (fromSnapshot) or a session forked (forkedFrom).
	fromSnapshot, forkedFrom string
	// asleep is the hibernation snapshot of a session without a kernel
	// (hibernate.go); hibernating says a worker is saving it; hibFails
	// counts its failed hibernations in a row, hibRetry is when the next
	// may be tried.
	asleep      string
	hibernating bool
	hibFails    int
	loadFails   int // loads of its hibernation in a row that ended the interpreter
	// restored: the session was adopted from its checkpoint after its
	// node was lost; its first cell says so.
	restored *RestoredFrom
	// checkpoint is its latest checkpoint (checkpoint.go), taken at
	// checkpointAt; checkpointing is closed when the one being taken ends.
	checkpoint    string
	checkpointAt  time.Time
	checkpointing chan struct{}
	hibRetry      time.Time

	// files is held for reading by a file call while it uses the kernel,
	// and for writing by a hibernation: a file written during a
	// hibernation is never left out of its snapshot.
	files sync.RWMutex
}

// Owner is the caller that created the session.
func (s *Live) Owner() string { return s.caller }

// Info describes the session.
func (s *Live) Info() Session {
	s.mu.Lock()
	k, state := s.k, Idle
	switch {
	case s.busy:
		state = Busy
	case s.asleep != "":
		state = Hibernated
	}
	out := Session{ID: s.id, State: state, PythonVersion: s.python, Caller: s.caller, Network: s.spec.Network,
		ExecutionCount: s.count, CreatedAt: s.created, LastActivity: s.last, ExpiresAt: s.expires,
		IdleTimeout: s.idle, MemoryLimit: s.spec.Limits.MemoryBytes, DiskLimit: s.spec.Limits.WorkspaceBytes,
		Restarts: s.restarts, FromSnapshot: s.fromSnapshot, ForkedFrom: s.forkedFrom}
	s.mu.Unlock()
	if k != nil {
		out.MemoryBytes = k.proc.MemoryUsage()
	}
	return out
}

// kernel returns the current kernel.
func (s *Live) kernel() *kernel {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.k
}

// Create starts a session owned by req.Caller: a jail and an interpreter
// that waits for cells. It fails with ErrTooMany over the node's or the
// caller's cap, and run.ErrInvalid for a request the server refuses.
func (m *Service) Create(ctx context.Context, req Request) (Session, error) {
	unhold, err := m.hold()
	if err != nil {
		return Session{}, err
	}
	defer unhold()
	s, err := m.launch(ctx, req)
	if err != nil {
		return Session{}, err
	}
	s.run.Unlock()
	m.log.Info("session created", "session_id", s.id, "caller", s.caller, "python", s.python, "forked", s.kernel().forked)
	return s.Info(), nil
}

// configured makes the session req asks for, not started: its idle
// timeout and lifetime within the server's bounds, its jail's spec and
// environment.
func (m *Service) configured(ctx context.Context, req Request) (*Live, error) {
	s, err := m.unprepared(req)
	if err != nil {
		return nil, err
	}
	if err := m.prepareEnv(ctx, s, req.Progress); err != nil {
		return nil, err
	}
	return s, nil
}

// unprepared is configured without the environment: the spec runs the
// bare interpreter until prepareEnv leases the session's environment.
func (m *Service) unprepared(req Request) (*Live, error) {
	c := m.cfg
	idle, err := pickDuration(req.IdleTimeout, c.DefaultIdle, c.MaxIdle, "idle timeout")
	if err != nil {
		return nil, err
	}
	life, err := pickDuration(req.MaxLifetime, c.DefaultLifetime, c.MaxLifetime, "max lifetime")
	if err != nil {
		return nil, err
	}
	s, err := m.sessionSpec(req, life)
	if err != nil {
		return nil, err
	}
	s.idle, s.life, s.req = idle, life, req
	return s, nil
}

// launch starts a session of req, registered under the caps, its kernel
// running: it returns it with s.run held, so that it takes no cell before
// its caller is done with it (a restore loads its state first). The
// caller holds the service (hold).
func (m *Service) launch(ctx context.Context, req Request) (*Live, error) {
	if m.deps.Jails == nil {
		return nil, ErrDisabled
	}
	s, err := m.configured(ctx, req)
	if err != nil {
		return nil, err
	}
	s.req.Progress, s.req.FromSnapshot = nil, "" // a fork repeats the configuration, not the restore
	if s.id, err = newID(); err != nil {
		s.release()
		return nil, err
	}
	if err := m.reserve(s); err != nil {
		s.release()
		return nil, err
	}
	if err := m.mountWorkspace(ctx, s, req); err != nil {
		m.forget(s)
		s.release()
		return nil, err
	}
	s.run.Lock()
	k, err := m.startKernel(m.base, s.spec, s.startForks, s.kernelNet())
	if err != nil {
		m.forget(s)
		s.release()
		return nil, fmt.Errorf("engine: %w", err)
	}
	s.mu.Lock()
	gone := s.gone
	s.k, s.last = k, run.Now() // idle from when it can take a cell
	s.mu.Unlock()
	m.watchKernel(k)
	if gone { // deleted or shut down while it started
		k.stop()
		s.release()
		return nil, fmt.Errorf("%w: %s", ErrEnded, s.id)
	}
	return s, nil
}

// sessionSpec validates req and builds the kernel's jail spec, for the
// bare interpreter (prepareEnv puts the session's environment in).
func (m *Service) sessionSpec(req Request, life time.Duration) (*Live, error) {
	np, err := m.planNetwork(req)
	if err != nil {
		return nil, err
	}
	ropts := runner.Options{FigureFormat: req.FigureFormat, MaxRows: req.MaxRows}
	if err := ropts.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", run.ErrInvalid, err)
	}
	mem := req.MemoryBytes
	if mem == 0 {
		mem = min(m.cfg.DefaultMemoryBytes, m.lim.MaxMemoryBytes)
	}
	limits, err := m.lim.For(run.Request{MemoryBytes: mem, DiskBytes: req.DiskBytes, CPUShares: req.CPUShares})
	if err != nil {
		return nil, invalidf("%v", err)
	}
	// The jail's clocks bound the session's life; a cell's timeout is the
	// engine's business (it interrupts the cell, not the session).
	limits.WallTime = life
	limits.CPUTime = time.Duration(float64(life) * max(limits.CPUs, 1))
	interp, err := m.deps.Interpreters.Lookup(req.PythonVersion)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", run.ErrInvalid, err)
	}
	mounts := make([]sandbox.Mount, len(interp.Mounts))
	for i, m := range interp.Mounts {
		mounts[i] = sandbox.Mount{Source: m}
	}
	now := run.Now()
	s := &Live{
		caller: req.Caller, python: interp.Version, interp: interp, release: func() {}, envPending: true, created: now, last: now,
		expires: now.Add(life),
		net:     np,
		spec: sandbox.Spec{
			Argv:          runner.SessionArgv(interp.Path, runner.SessionOptions{FigureFormat: req.FigureFormat, MaxRows: req.MaxRows}),
			Dir:           sandbox.WorkDir,
			Mounts:        mounts,
			Network:       req.Network,
			Limits:        limits,
			ResultChannel: true,
			StreamChannel: true,
			Requests:      true,
			LiveOnly:      true,
		},
	}
	if req.Network {
		s.use = &netUse{}
	}
	if s.spec, err = withNetwork(s.spec, req, np); err != nil {
		return nil, err
	}
	if err := s.spec.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", run.ErrInvalid, err)
	}
	return s, nil
}

// prepareEnv leases s's environment (sessionEnv, for s.req) and puts it
// in s's spec: the interpreter to run and the directories to mount. A
// session ended or parked meanwhile gets none (errParkedMeanwhile).
func (m *Service) prepareEnv(ctx context.Context, s *Live, progress func(string)) error {
	python, lease, err := m.sessionEnv(ctx, s.interp, s.req.Requirements, progress)
	if err != nil {
		return err
	}
	s.mu.Lock()
	spec := s.spec
	spec.Argv = runner.SessionArgv(python, runner.SessionOptions{FigureFormat: s.req.FigureFormat, MaxRows: s.req.MaxRows})
	spec.Mounts = slices.Clone(spec.Mounts)
	for _, d := range lease.dirs {
		spec.Mounts = append(spec.Mounts, sandbox.Mount{Source: d})
	}
	err = spec.Validate()
	switch {
	case err != nil:
		err = fmt.Errorf("%w: %w", run.ErrInvalid, err)
	case s.gone:
		err = fmt.Errorf("%w: %s", errParkedMeanwhile, s.id)
	default:
		s.spec, s.release, s.startForks, s.envPending = spec, lease.release, !lease.layered, false
	}
	s.mu.Unlock()
	if err != nil {
		lease.release()
	}
	return err
}

// envLease is a session's dependency environment, if it has one.
type envLease struct {
	dirs    []string
	release func()
	layered bool // requirements of the session's own over the base
}

// sessionEnv leases the session's environment and returns the
// interpreter to run in it: the base environment, with requirements
// layered over it when there are any. Requirements "-" ask for the bare
// interpreter. A base environment that cannot be built leaves a session
// without requirements on the bare interpreter (logged); requirements
// that cannot be installed are an ErrInvalid whose message starts with
// install_error.
func (m *Service) sessionEnv(ctx context.Context, in run.Interpreter, requirements string, progress func(string)) (string, envLease, error) {
	none := envLease{release: func() {}}
	if m.deps.Envs == nil {
		if requirements != "" && requirements != pyenv.NoDetection {
			return "", none, invalidf("requirements need dependency environments, which this engine was started without")
		}
		return in.Path, none, nil
	}
	if requirements == pyenv.NoDetection {
		return in.Path, none, nil
	}
	var own pyenv.Set
	if requirements != "" {
		needs, err := m.deps.Envs.Resolve(ctx, in, nil, "", requirements)
		if err != nil {
			return "", none, fmt.Errorf("%w: %w", run.ErrInvalid, err)
		}
		own = needs.Set
	}
	set := pyenv.Merge(own, m.deps.Envs.Base()) // the session's own constraints win
	if len(set) == 0 {
		return in.Path, none, nil
	}
	if progress == nil {
		progress = func(string) {}
	}
	if len(own) > 0 && len(set) > len(own) {
		// The base first (built, or joined while it builds) so that the
		// requirements become a small layer over it.
		if base, err := m.deps.Envs.Acquire(ctx, in, m.deps.Envs.Base(), progress); err == nil {
			defer base.Release()
		}
	}
	lease, err := m.deps.Envs.Acquire(ctx, in, set, progress)
	switch {
	case err != nil && len(own) == 0 && errors.Is(err, pyenv.ErrInstall):
		m.log.Warn("session starts without the base environment, which could not be built", "err", err)
		return in.Path, none, nil
	case errors.Is(err, pyenv.ErrInstall):
		return "", none, fmt.Errorf("%w: %s: %w", run.ErrInvalid, run.ReasonInstallError, err)
	case err != nil:
		return "", none, fmt.Errorf("engine: preparing the session's environment: %w", err)
	}
	return lease.Python(), envLease{dirs: lease.Dirs(), release: lease.Release, layered: len(own) > 0}, nil
}

func pickDuration(v, def, maxv time.Duration, what string) (time.Duration, error) {
	switch {
	case v < 0:
		return 0, invalidf("%s must not be negative", what)
	case v == 0:
		return def, nil
	case v > maxv:
		return 0, invalidf("%s %s exceeds the server's limit of %s", what, v, maxv)
	}
	return v, nil
}

// reserve registers s under the node's and its caller's caps.
func (m *Service) reserve(s *Live) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.roomFor(s.caller); err != nil {
		return err
	}
	m.live[s.id] = s
	return nil
}

// roomFor fails unless one more session of caller fits (m.mu held).
func (m *Service) roomFor(caller string) error {
	if m.closed {
		return run.ErrClosed
	}
	if len(m.live) >= m.cfg.Max {
		return fmt.Errorf("%w: this server holds its maximum of %d sessions", ErrTooMany, m.cfg.Max)
	}
	mine := 0
	for _, o := range m.live {
		if o.caller == caller {
			mine++
		}
	}
	if mine >= m.cfg.MaxPerCaller {
		return fmt.Errorf("%w: at most %d sessions per caller", ErrTooMany, m.cfg.MaxPerCaller)
	}
	return nil
}

// forget removes s from the registry; it reports whether s was there.
func (m *Service) forget(s *Live) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.live[s.id] != s {
		return false
	}
	delete(m.live, s.id)
	s.mu.Lock()
	s.gone = true
	s.mu.Unlock()
	return true
}

// watchKernel ends the session's kernel bookkeeping when it dies.
func (m *Service) watchKernel(k *kernel) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		k.watch()
	}()
}

// Lookup finds the live session id; ErrNotFound when there is none. It
// does not check who asks: the engine does, before anything else.
func (m *Service) Lookup(id string) (*Live, error) {
	m.mu.Lock()
	s := m.live[id]
	m.mu.Unlock()
	if s == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return s, nil
}

// Parked says whether this run's shutdown parked session id, and for
// which owner.
func (m *Service) Parked(id string) (owner string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.parked[id]
	return p.Caller, ok
}

// List lists the live sessions of the owners may accepts, and those this
// run's shutdown parked (hibernated), oldest first.
func (m *Service) List(may func(owner string) bool) []Session {
	m.mu.Lock()
	var list []*Live
	out := make([]Session, 0, len(m.live))
	for _, s := range m.live {
		if may(s.caller) {
			list = append(list, s)
		}
	}
	for _, p := range m.parked {
		if may(p.Caller) {
			out = append(out, p)
		}
	}
	m.mu.Unlock()
	for _, s := range list {
		out = append(out, s.Info())
	}
	sortSessions(out)
	return out
}

// Delete ends a session: its interpreter, its jail and its files. A
// running cell ends with it.
func (m *Service) Delete(s *Live) { m.endSession(s, "deleted") }

// endSession removes s and stops its kernel.
func (m *Service) endSession(s *Live, why string) {
	if !m.forget(s) {
		return
	}
	if k := s.kernel(); k != nil {
		k.stop()
	}
	s.mu.Lock()
	asleep, ckpt := s.asleep, s.checkpoint
	s.checkpoint = ""
	s.mu.Unlock()
	for _, snap := range []string{asleep, ckpt} {
		if snap != "" {
			m.forgetSnapshot(snap)
		}
	}
	s.release()
	m.sessionEnded(s)
	m.log.Info("session ended", "session_id", s.id, "why", why)
}

// Fence ends every live session of this node without telling Deps.OnEnd
// and without deleting any of their snapshots, and returns their ids: the
// fleet declared this node lost, so other nodes may resume these sessions
// from their checkpoints, which the fleet's records name (the sweep
// deletes the snapshots nobody names). A running cell ends with its
// session.
func (m *Service) Fence() []string {
	m.mu.Lock()
	list := make([]*Live, 0, len(m.live))
	for _, s := range m.live {
		list = append(list, s)
	}
	m.mu.Unlock()
	var ids []string
	for _, s := range list {
		if !m.forget(s) {
			continue
		}
		if k := s.kernel(); k != nil {
			k.stop()
		}
		s.release()
		ids = append(ids, s.id)
		m.log.Warn("session ended here: the fleet declared this node lost, and another node may resume it", "session_id", s.id)
	}
	return ids
}

// Stats counts this node's live and busy sessions.
func (m *Service) Stats() Stats {
	m.mu.Lock()
	list := make([]*Live, 0, len(m.live))
	for _, s := range m.live {
		list = append(list, s)
	}
	m.mu.Unlock()
	st := Stats{Live: len(list), Hibernated: m.counts.hibernated.Load(), HibernateFailed: m.counts.hibernateFailed.Load(),
		HibernateEnded: m.counts.hibernateEnded.Load(), Resumed: m.counts.resumed.Load(), ResumeFailed: m.counts.resumeFailed.Load()}
	for _, s := range list {
		s.mu.Lock()
		if s.busy {
			st.Busy++
		}
		if s.asleep != "" {
			st.Asleep++
		}
		k := s.k
		s.mu.Unlock()
		if k != nil {
			st.MemoryBytes += k.proc.MemoryUsage()
		}
	}
	return st
}

// newID returns "ses_" + a UUIDv7, made as execution ids are.
func newID() (string, error) {
	u, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("engine: generating an id: %w", err)
	}
	return "ses_" + u.String(), nil
}
