package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/pyenv"
	"github.com/pyexec/pyexec/internal/runner"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// sessions is the registry of this node's live sessions.
type sessions struct {
	mu     sync.Mutex
	live   map[string]*session
	closed bool
}

func newSessions() *sessions { return &sessions{live: make(map[string]*session)} }

// session is one live session. Its kernel changes on restart.
type session struct {
	id, caller string
	python     string // the interpreter's version
	spec       sandbox.Spec
	release    func() // the environment lease
	// startForks says that a kernel may start the fork server it forks
	// from: its environment is the base's (or the bare interpreter). A
	// session with requirements of its own forks only from a server its
	// layered environment already has, else it starts cold.
	startForks bool
	idle       time.Duration
	created    time.Time
	expires    time.Time

	// run serialises cells, restarts and the end of the session.
	run sync.Mutex

	mu       sync.Mutex
	k        *kernel
	count    int
	busy     bool
	last     time.Time
	restarts int
	gone     bool // deleted or reaped: no longer in the registry
}

func (s *session) info() Session {
	s.mu.Lock()
	k, state := s.k, SessionIdle
	if s.busy {
		state = SessionBusy
	}
	out := Session{ID: s.id, State: state, PythonVersion: s.python, Caller: s.caller, Network: s.spec.Network,
		ExecutionCount: s.count, CreatedAt: s.created, LastActivity: s.last, ExpiresAt: s.expires,
		IdleTimeout: s.idle, MemoryLimit: s.spec.Limits.MemoryBytes, DiskLimit: s.spec.Limits.WorkspaceBytes,
		Restarts: s.restarts}
	s.mu.Unlock()
	if k != nil {
		out.MemoryBytes = k.proc.MemoryUsage()
	}
	return out
}

// kernel returns the current kernel.
func (s *session) kernel() *kernel {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.k
}

// CreateSession starts a session: a jail and an interpreter that waits for
// cells. It fails with ErrTooManySessions over the node's or the caller's
// cap, and ErrInvalid for a request the server refuses.
func (e *Engine) CreateSession(ctx context.Context, req SessionRequest) (Session, error) {
	if e.deps.Jails == nil {
		return Session{}, ErrSessionsDisabled
	}
	unhold, err := e.hold()
	if err != nil {
		return Session{}, err
	}
	defer unhold()
	c := e.cfg.Sessions
	idle, err := pickDuration(req.IdleTimeout, c.DefaultIdle, c.MaxIdle, "idle timeout")
	if err != nil {
		return Session{}, err
	}
	life, err := pickDuration(req.MaxLifetime, c.DefaultLifetime, c.MaxLifetime, "max lifetime")
	if err != nil {
		return Session{}, err
	}
	s, err := e.sessionSpec(ctx, req, life)
	if err != nil {
		return Session{}, err
	}
	s.idle = idle
	id, err := newID()
	if err != nil {
		s.release()
		return Session{}, err
	}
	s.id = "ses_" + id[len("exe_"):]
	if err := e.reserve(s); err != nil {
		s.release()
		return Session{}, err
	}
	k, err := e.startKernel(e.base, s.spec, s.startForks)
	if err != nil {
		e.forget(s)
		s.release()
		return Session{}, fmt.Errorf("engine: %w", err)
	}
	s.mu.Lock()
	gone := s.gone
	s.k, s.last = k, run.Now() // idle from when it can take a cell
	s.mu.Unlock()
	e.watchKernel(k)
	if gone { // deleted or shut down while it started
		k.proc.Kill()
		s.release()
		return Session{}, fmt.Errorf("%w: %s", ErrSessionEnded, s.id)
	}
	e.log.Info("session created", "session_id", s.id, "caller", s.caller, "python", s.python, "forked", k.forked)
	return s.info(), nil
}

// sessionSpec validates req and builds the kernel's jail spec.
func (e *Engine) sessionSpec(ctx context.Context, req SessionRequest, life time.Duration) (*session, error) {
	if req.Network {
		// A session's kernel lives long and would need its own egress;
		// network runs only in executions (docs/network.md).
		return nil, invalidf("network access is not available in sessions")
	}
	ropts := runner.Options{FigureFormat: req.FigureFormat, MaxRows: req.MaxRows}
	if err := ropts.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	env, err := run.BuildEnv(req.Env)
	if err != nil {
		return nil, invalidf("%v", err)
	}
	mem := req.MemoryBytes
	if mem == 0 {
		mem = min(e.cfg.Sessions.DefaultMemoryBytes, e.cfg.MaxMemoryBytes)
	}
	limits, err := e.lim.For(Request{MemoryBytes: mem, DiskBytes: req.DiskBytes, CPUShares: req.CPUShares})
	if err != nil {
		return nil, invalidf("%v", err)
	}
	// The jail's clocks bound the session's life; a cell's timeout is the
	// engine's business (it interrupts the cell, not the session).
	limits.WallTime = life
	limits.CPUTime = time.Duration(float64(life) * max(limits.CPUs, 1))
	interp, err := e.deps.Interpreters.Lookup(req.PythonVersion)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	mounts := make([]sandbox.Mount, len(interp.Mounts))
	for i, m := range interp.Mounts {
		mounts[i] = sandbox.Mount{Source: m}
	}
	python, release, err := e.sessionEnv(ctx, interp, req.Requirements, req.Progress)
	if err != nil {
		return nil, err
	}
	for _, d := range release.dirs {
		mounts = append(mounts, sandbox.Mount{Source: d})
	}
	now := run.Now()
	s := &session{
		caller: req.Caller, python: interp.Version, release: release.release, startForks: !release.layered, created: now, last: now,
		expires: now.Add(life),
		spec: sandbox.Spec{
			Argv:          runner.SessionArgv(python, runner.SessionOptions{FigureFormat: req.FigureFormat, MaxRows: req.MaxRows}),
			Env:           env,
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
	if err := s.spec.Validate(); err != nil {
		release.release()
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return s, nil
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
func (e *Engine) sessionEnv(ctx context.Context, in Interpreter, requirements string, progress func(string)) (string, envLease, error) {
	none := envLease{release: func() {}}
	if e.deps.Envs == nil {
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
		needs, err := e.deps.Envs.Resolve(ctx, in, nil, "", requirements)
		if err != nil {
			return "", none, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		own = needs.Set
	}
	set := pyenv.Merge(own, e.deps.Envs.Base()) // the session's own constraints win
	if len(set) == 0 {
		return in.Path, none, nil
	}
	if progress == nil {
		progress = func(string) {}
	}
	if len(own) > 0 && len(set) > len(own) {
		// The base first (built, or joined while it builds) so that the
		// requirements become a small layer over it.
		if base, err := e.deps.Envs.Acquire(ctx, in, e.deps.Envs.Base(), progress); err == nil {
			defer base.Release()
		}
	}
	lease, err := e.deps.Envs.Acquire(ctx, in, set, progress)
	switch {
	case err != nil && len(own) == 0 && errors.Is(err, pyenv.ErrInstall):
		e.log.Warn("session starts without the base environment, which could not be built", "err", err)
		return in.Path, none, nil
	case errors.Is(err, pyenv.ErrInstall):
		return "", none, fmt.Errorf("%w: %s: %w", ErrInvalid, ReasonInstallError, err)
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
func (e *Engine) reserve(s *session) error {
	r := e.sess
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if len(r.live) >= e.cfg.Sessions.Max {
		return fmt.Errorf("%w: this server holds its maximum of %d sessions", ErrTooManySessions, e.cfg.Sessions.Max)
	}
	mine := 0
	for _, o := range r.live {
		if o.caller == s.caller {
			mine++
		}
	}
	if mine >= e.cfg.Sessions.MaxPerCaller {
		return fmt.Errorf("%w: at most %d sessions per caller", ErrTooManySessions, e.cfg.Sessions.MaxPerCaller)
	}
	r.live[s.id] = s
	return nil
}

// forget removes s from the registry; it reports whether s was there.
func (e *Engine) forget(s *session) bool {
	r := e.sess
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.live[s.id] != s {
		return false
	}
	delete(r.live, s.id)
	s.mu.Lock()
	s.gone = true
	s.mu.Unlock()
	return true
}

// watchKernel ends the session's kernel bookkeeping when it dies.
func (e *Engine) watchKernel(k *kernel) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		k.watch()
	}()
}

// lookup finds a live session for c. A caller that may not use it gets
// ErrSessionNotFound, as if it did not exist; an admin's use of another
// caller's session goes to the audit trail.
func (e *Engine) lookup(id string, c Caller) (*session, error) {
	e.sess.mu.Lock()
	s := e.sess.live[id]
	e.sess.mu.Unlock()
	if s == nil || !c.owns(s.caller) {
		return nil, fmt.Errorf("%w: %s", ErrSessionNotFound, id)
	}
	if c.Name != s.caller {
		e.appendAction(context.Background(), actionRecord{Action: actionSession, Caller: c.Name, Admin: c.Admin,
			SessionID: id, Owner: s.caller})
	}
	return s, nil
}

// GetSession describes a live session; ErrSessionNotFound when there is
// none or it is not c's.
func (e *Engine) GetSession(_ context.Context, id string, c Caller) (Session, error) {
	s, err := e.lookup(id, c)
	if err != nil {
		return Session{}, err
	}
	return s.info(), nil
}

// ListSessions lists the live sessions of c (an admin's: every
// caller's), oldest first.
func (e *Engine) ListSessions(ctx context.Context, c Caller) []Session {
	if c.Admin {
		e.appendAction(ctx, actionRecord{Action: actionListAllSess, Caller: c.Name, Admin: true})
	}
	e.sess.mu.Lock()
	var list []*session
	for _, s := range e.sess.live {
		if c.Admin || (c.Name != "" && s.caller == c.Name) {
			list = append(list, s)
		}
	}
	e.sess.mu.Unlock()
	out := make([]Session, 0, len(list))
	for _, s := range list {
		out = append(out, s.info())
	}
	sortSessions(out)
	return out
}

// DeleteSession ends a session: its interpreter, its jail and its files.
// A running cell ends with it.
func (e *Engine) DeleteSession(_ context.Context, id string, c Caller) error {
	s, err := e.lookup(id, c)
	if err != nil {
		return err
	}
	e.endSession(s, "deleted")
	return nil
}

// endSession removes s and stops its kernel.
func (e *Engine) endSession(s *session, why string) {
	if !e.forget(s) {
		return
	}
	if k := s.kernel(); k != nil {
		k.stop()
	}
	s.release()
	e.sessionEnded(s)
	e.log.Info("session ended", "session_id", s.id, "why", why)
}

// SessionStats counts this node's live and busy sessions.
func (e *Engine) SessionStats() SessionStats {
	e.sess.mu.Lock()
	list := make([]*session, 0, len(e.sess.live))
	for _, s := range e.sess.live {
		list = append(list, s)
	}
	e.sess.mu.Unlock()
	st := SessionStats{Live: len(list)}
	for _, s := range list {
		s.mu.Lock()
		if s.busy {
			st.Busy++
		}
		k := s.k
		s.mu.Unlock()
		if k != nil {
			st.MemoryBytes += k.proc.MemoryUsage()
		}
	}
	return st
}
