package sessions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/runner"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/snapshot"
)

// A session's state leaves its kernel and enters another through cells of
// pyexec's own (flagged x: runner's SaveRequest and LoadRequest). Such a
// cell is numbered after the session's last cell without counting as
// one: the next cell of the user's takes the same number. Its output is
// dropped; its report says whether it worked.
//
//	save:  SaveRequest(n) → the state on the channel (ExpectState) → report
//	load:  LoadRequest(n, size) + the state on the request pipe → report

// Vault keeps snapshots: the engine's snapshots service (through the
// façade). Without one, sessions are neither snapshotted nor restored.
type Vault interface {
	// Begin starts storing the snapshot h describes (ID, Owner, Kind
	// set): its file goes to the Pending's Writer as it is made.
	Begin(ctx context.Context, h snapshot.Header) (Pending, error)
	// Open reads snapshot id and verifies it for owner (a hibernated
	// session's own); Delete removes one, a missing one is no error.
	Open(ctx context.Context, id, owner string) (*snapshot.Snapshot, error)
	Delete(ctx context.Context, id string) error
}

// Pending is a snapshot being stored.
type Pending interface {
	Writer() *snapshot.Writer
	// Commit ends the file and waits until it is stored; it returns its
	// size.
	Commit() (int64, error)
	// Abort drops it and returns err as the caller should report it.
	Abort(err error) error
}

// startOwn makes pyexec's own cell number n the running one.
func (k *kernel) startOwn(n int) *cellRun {
	c := newCellRun(n, 0)
	c.own = true
	k.mu.Lock()
	k.cur = c
	k.mu.Unlock()
	return c
}

// own runs pyexec's own cell number n within ctx: send writes its frame
// and what follows it. See awaitOwn for its end.
func (k *kernel) own(ctx context.Context, n int, send func() error, timeout, grace time.Duration) (*run.Report, error) {
	c := k.startOwn(n)
	defer k.finish(c)
	// A send that blocks on a kernel that stopped reading ends with it.
	kill := time.AfterFunc(timeout+grace, k.proc.Kill)
	defer kill.Stop()
	if err := send(); err != nil {
		// It ended, or is killed now: either way it has ended.
		k.proc.Kill()
		return nil, fmt.Errorf("%w: it stopped taking its state: %w", errKernelEnded, err)
	}
	return k.awaitOwn(ctx, c, timeout, grace)
}

// awaitOwn waits for pyexec's own cell c to end. Past timeout, or once
// ctx ends, it is interrupted (a save listens while it pickles, a load
// while it unpickles); grace later the kernel is killed: a kernel that
// did not finish pyexec's own cell cannot be trusted with the next. An
// error (errKernelEnded) means the cell has no report: the kernel ended
// or was killed.
func (k *kernel) awaitOwn(ctx context.Context, c *cellRun, timeout, grace time.Duration) (*run.Report, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	interrupt := func() {
		_ = k.proc.Signal(syscall.SIGINT)
		g := time.NewTimer(grace)
		defer g.Stop()
		select {
		case <-c.done:
		case <-g.C:
			k.proc.Kill()
			<-c.done // the kernel's end closes it
		}
	}
	select {
	case <-c.done:
	case <-t.C:
		interrupt()
	case <-ctx.Done():
		interrupt()
	}
	k.mu.Lock()
	rep := c.report
	k.mu.Unlock()
	if rep == nil {
		return nil, errKernelEnded
	}
	return rep, nil
}

// reportErr is the error a report of pyexec's own cell carries, if any.
func reportErr(rep *run.Report, doing string) error {
	if rep.ErrorType == "" {
		return nil
	}
	return fmt.Errorf("%s the session's state: %s: %s", doing, rep.ErrorType, rep.Error)
}

// stateSink takes the state a kernel writes after SaveRequest
// (runner.StateSink) and says when its last byte went by.
type stateSink struct {
	w     io.Writer // nil: discard
	ended chan error
}

func (s stateSink) Write(p []byte) (int, error) {
	if s.w == nil {
		return len(p), nil
	}
	return s.w.Write(p)
}

func (s stateSink) End(err error) { s.ended <- err }

// pullingSink is a stateSink whose writer takes the rest of the state
// itself (statePipe).
type pullingSink struct {
	stateSink
	p interface{ Pull(n int64) (int64, error) }
}

func (s pullingSink) Pull(n int64) (int64, error) { return s.p.Pull(n) }

// saveState has k save its state, as pyexec's own cell n: begin receives
// what the kernel says of it and returns where its bytes go (an error
// discards them). It returns once the cell ended and the state went
// by; the error is the first of begin's, the kernel's and the sink's.
func (m *Service) saveState(ctx context.Context, k *kernel, n int, begin func(runner.StateMeta) (io.Writer, error)) error {
	ended := make(chan error, 1)
	var mu sync.Mutex
	var beginErr error
	k.scan.ExpectState(func(meta runner.StateMeta) runner.StateSink {
		w, err := begin(meta)
		if err != nil {
			mu.Lock()
			beginErr = err
			mu.Unlock()
			w = nil
		}
		if p, ok := w.(interface{ Pull(int64) (int64, error) }); ok {
			return pullingSink{stateSink{w: w, ended: ended}, p}
		}
		return stateSink{w: w, ended: ended}
	})
	// Disarmed whatever happens: a {"snapshot": ...} line the user's code
	// writes later must not reach this save.
	defer k.scan.ExpectState(nil)
	rep, err := k.own(ctx, n, func() error { return k.proc.Send(runner.SaveRequest(n)) }, m.cfg.SaveTimeout, m.cfg.InterruptGrace)
	if err != nil {
		return err
	}
	if err := reportErr(rep, "saving"); err != nil {
		return err
	}
	select {
	case err := <-ended:
		mu.Lock()
		defer mu.Unlock()
		return errors.Join(beginErr, err)
	default:
		return errors.New("the session's interpreter wrote no state")
	}
}

// loadState has k load size bytes of state read from state, as pyexec's
// own cell n, within loadTimeout(size) or until the service aborts.
func (m *Service) loadState(k *kernel, n int, size int64, state io.Reader) (runner.Loaded, error) {
	loaded, stop := k.expectLoaded()
	defer stop()
	rep, err := k.own(m.base, n, func() error { return runner.SendState(k.proc.Send, n, size, state) }, m.loadTimeout(size),
		m.cfg.InterruptGrace)
	if err != nil {
		return runner.Loaded{}, err
	}
	return loaded(rep)
}

// expectLoaded arms k's scanner for what it says it loaded: loaded
// returns it once the load's report rep arrived; stop disarms.
func (k *kernel) expectLoaded() (loaded func(rep *run.Report) (runner.Loaded, error), stop func()) {
	var mu sync.Mutex
	var got *runner.Loaded
	k.scan.OnLoaded(func(l runner.Loaded) {
		mu.Lock()
		got = &l
		mu.Unlock()
	})
	return func(rep *run.Report) (runner.Loaded, error) {
		if err := reportErr(rep, "loading"); err != nil {
			return runner.Loaded{}, fmt.Errorf("%w: %w", errUnloadable, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if got == nil {
			return runner.Loaded{}, errors.New("the session's interpreter did not say what it loaded")
		}
		return *got, nil
	}, func() { k.scan.OnLoaded(nil) }
}

// claim takes s, between cells, for pyexec's own cell (a save): ErrBusy
// while a cell runs or the session restarts (a checkpoint under way is
// waited for), ErrEnded once it is gone.
// A hibernated s resumes first, waiting for its environment as long as ctx
// lets it. It returns the kernel with s shown busy (the reaper leaves it alone);
// done gives s back.
func (m *Service) claim(ctx context.Context, s *Live) (k *kernel, done func(), err error) {
	if !m.cellTurn(ctx, s) {
		return nil, nil, fmt.Errorf("%w: %s", ErrBusy, s.id)
	}
	s.mu.Lock()
	gone := s.gone
	s.mu.Unlock()
	if gone {
		s.run.Unlock()
		return nil, nil, fmt.Errorf("%w: %s", ErrEnded, s.id)
	}
	if _, err := m.wake(ctx, s); err != nil {
		s.run.Unlock()
		return nil, nil, err
	}
	if k, err = liveKernel(s); err != nil {
		s.run.Unlock()
		return nil, nil, err
	}
	s.mu.Lock()
	s.busy = true
	s.mu.Unlock()
	return k, func() {
		s.mu.Lock()
		s.busy, s.last = false, run.Now()
		s.mu.Unlock()
		s.run.Unlock()
	}, nil
}

// save writes session s (its kernel k, claimed) as a snapshot of kind:
// its state, then its workspace. Nothing is stored unless both went in
// whole.
func (m *Service) save(ctx context.Context, s *Live, k *kernel, kind string) (Saved, error) {
	if m.deps.Vault == nil {
		return Saved{}, ErrNoSnapshots
	}
	s.mu.Lock()
	n := s.count
	s.mu.Unlock()
	var pend Pending
	var h snapshot.Header
	err := m.saveState(ctx, k, n+1, func(meta runner.StateMeta) (io.Writer, error) {
		h = snapshot.Header{ID: snapshot.NewID(), Owner: s.caller, Created: run.Now(), Kind: kind, SessionID: s.id,
			Session: s.header(k), ExecutionCount: n, Saved: meta.Saved, Skipped: meta.Skipped, StateBytes: meta.Bytes}
		p, err := m.deps.Vault.Begin(ctx, h)
		if err != nil {
			return nil, err
		}
		pend = p
		return p.Writer().State(), nil
	})
	if err != nil {
		if pend != nil {
			err = pend.Abort(err)
		}
		return Saved{}, fmt.Errorf("engine: snapshot of session %s: %w", s.id, err)
	}
	root, err := k.proc.Workspace()
	if err == nil {
		err = snapshot.Tar(pend.Writer().Files(), root, s.spec.Limits.WorkspaceBytes)
		root.Close()
	} else if errors.Is(err, os.ErrProcessDone) {
		// It ended after its state was written (Snapshot ends the session).
		err = fmt.Errorf("%w: %w", errKernelEnded, err)
	}
	if err != nil {
		return Saved{}, fmt.Errorf("engine: snapshot of session %s: %w", s.id, pend.Abort(err))
	}
	size, err := pend.Commit()
	if err != nil {
		return Saved{}, fmt.Errorf("engine: snapshot of session %s: %w", s.id, err)
	}
	m.log.Info("session saved", "session_id", s.id, "snapshot_id", h.ID, "kind", kind, "bytes", size,
		"skipped", len(h.Skipped))
	return Saved{ID: h.ID, Bytes: size, ExecutionCount: n, Saved: nonNil(h.Saved), Skipped: nonNil(h.Skipped)}, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// header is the configuration a restore recreates s with: its
// interpreter by minor version (a state loads in the interpreter line it
// was pickled by, whatever its patch level), and what its network spent
// so far (k's egress included).
func (s *Live) header(k *kernel) snapshot.Session {
	l := s.spec.Limits
	minor := s.python
	if parts := strings.SplitN(minor, ".", 3); len(parts) == 3 {
		minor = parts[0] + "." + parts[1]
	}
	return snapshot.Session{PythonVersion: minor, Requirements: s.req.Requirements, Env: s.req.Env,
		MemoryBytes: l.MemoryBytes, DiskBytes: l.WorkspaceBytes, CPUShares: s.req.CPUShares, IdleTimeout: s.idle,
		MaxLifetime: s.life, FigureFormat: s.req.FigureFormat, MaxRows: s.req.MaxRows,
		Network: s.req.Network, NetworkAllow: s.req.NetworkAllow, Secrets: s.req.Secrets,
		NetworkUsed: s.use.carried(k.liveEgressStats())}
}

// Snapshot saves session s as a snapshot its owner keeps
// (snapshot.KindUser): its variables, modules, functions and classes, and
// its workspace files. ErrBusy while a cell runs.
// A session whose interpreter ends while it saves (killed past the save
// timeout, out of memory, or code of its own that exits from a pickling
// hook) ends, and the error says so (ErrEnded): it has no interpreter to
// take its next cell.
func (m *Service) Snapshot(ctx context.Context, s *Live) (Saved, error) {
	saved, err := m.snapshot(ctx, s)
	if errors.Is(err, errKernelEnded) {
		m.endSession(s, "its interpreter ended while its state was saved")
		return Saved{}, fmt.Errorf("%w: %s: %w", ErrEnded, s.id, err)
	}
	return saved, err
}

// snapshot is Snapshot with s claimed for the save.
func (m *Service) snapshot(ctx context.Context, s *Live) (Saved, error) {
	k, done, err := m.claim(ctx, s)
	if err != nil {
		return Saved{}, err
	}
	defer done()
	ctx, cancel := m.detached(ctx)
	defer cancel()
	return m.save(ctx, s, k, snapshot.KindUser)
}

// detached is ctx without its cancellation, ended when the service stops
// (Close): a client that goes away while its session's state is saved
// does not interrupt the pickling (SIGINT in the session, then a kill if
// it does not end within InterruptGrace); the save is still bounded by
// SaveTimeout.
func (m *Service) detached(ctx context.Context) (context.Context, context.CancelFunc) {
	d, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(m.stopping, cancel)
	return d, func() {
		stop()
		cancel()
	}
}

// Restore starts a session owned by req.Caller holding the state of snap,
// which the engine verified for that owner: a new jail made as for any
// session, the snapshot's workspace files written into it, then its state
// loaded by the new interpreter. The session takes the snapshot's
// configuration where req leaves a field zero. A session that cannot load
// the state is ended.
func (m *Service) Restore(ctx context.Context, req Request, snap *snapshot.Snapshot) (Session, error) {
	h := snap.Header
	if req.Caller != h.Owner {
		// The engine restores only a caller's own snapshots (its MAC
		// is keyed by the owner); never load another's.
		return Session{}, fmt.Errorf("engine: snapshot %s is not the caller's", h.ID)
	}
	unhold, err := m.hold()
	if err != nil {
		return Session{}, err
	}
	defer unhold()
	req = withSnapshotConfig(req, h.Session)
	s, err := m.launch(ctx, req)
	if err != nil {
		return Session{}, err
	}
	defer s.run.Unlock()
	loaded, err := m.restoreInto(s, snap)
	if err != nil {
		m.endSession(s, "restore failed")
		return Session{}, fmt.Errorf("engine: restoring snapshot %s: %w", h.ID, err)
	}
	s.mu.Lock()
	s.count, s.fromSnapshot, s.last = h.ExecutionCount, h.ID, run.Now()
	s.mu.Unlock()
	m.log.Info("session restored", "session_id", s.id, "snapshot_id", h.ID, "caller", s.caller,
		"skipped", len(loaded.Skipped))
	info := s.Info()
	info.Skipped = loaded.Skipped
	return info, nil
}

// withSnapshotConfig fills the fields req leaves zero from a snapshot's
// session configuration, but for the network: a restored session has the
// network its request asks for, never one a snapshot carries.
func withSnapshotConfig(req Request, c snapshot.Session) Request {
	fill(&req.PythonVersion, c.PythonVersion)
	fill(&req.Requirements, c.Requirements)
	fill(&req.FigureFormat, c.FigureFormat)
	fill(&req.MemoryBytes, c.MemoryBytes)
	fill(&req.DiskBytes, c.DiskBytes)
	fill(&req.CPUShares, c.CPUShares)
	fill(&req.IdleTimeout, c.IdleTimeout)
	fill(&req.MaxLifetime, c.MaxLifetime)
	fill(&req.MaxRows, c.MaxRows)
	if req.Env == nil {
		req.Env = c.Env
	}
	return req
}

// fill sets *dst to v when it is zero.
func fill[T comparable](dst *T, v T) {
	var zero T
	if *dst == zero {
		*dst = v
	}
}

// restoreInto writes snap's workspace into s's new kernel and loads its
// state there (s.run held).
func (m *Service) restoreInto(s *Live, snap *snapshot.Snapshot) (runner.Loaded, error) {
	k := s.kernel()
	l := s.spec.Limits
	maxFiles := int(l.WorkspaceInodes)
	if maxFiles == 0 {
		maxFiles = math.MaxInt // the workspace has no inode limit: its bytes bound it
	}
	files, err := snapshot.Untar(snap.Files(), snapshot.UntarLimits{MaxFiles: maxFiles, MaxBytes: l.WorkspaceBytes})
	if err != nil {
		return runner.Loaded{}, err
	}
	if len(files) > 0 {
		sf := make([]sandbox.File, len(files))
		for i, f := range files {
			sf[i] = sandbox.File{Path: f.Path, Data: f.Data, Mode: f.Mode}
		}
		if err := k.proc.WriteFiles(sf); err != nil {
			return runner.Loaded{}, fmt.Errorf("writing the workspace: %w", err)
		}
	}
	return m.loadState(k, snap.Header.ExecutionCount+1, snap.StateBytes, snap.State())
}

// Fork starts a new session of the same owner and configuration as
// parent, holding a copy of its workspace and of its state: the parent's
// save is streamed into the child's load, piece by piece, as the parent
// writes it (nothing is stored). The two then diverge. ErrBusy while a
// cell of the parent runs. A child whose interpreter ends while it loads
// the state (ErrForkEnded) is undone; the parent keeps its interpreter.
func (m *Service) Fork(ctx context.Context, parent *Live) (Session, error) {
	unhold, err := m.hold()
	if err != nil {
		return Session{}, err
	}
	defer unhold()
	pk, done, err := m.claim(ctx, parent)
	if err != nil {
		return Session{}, err
	}
	defer done()
	files, err := m.workspaceFiles(pk, parent.spec.Limits.WorkspaceBytes)
	if errors.Is(err, os.ErrProcessDone) {
		return Session{}, m.kernelErr(parent, err)
	}
	if errors.Is(err, ErrWorkspaceTooLarge) {
		return Session{}, fmt.Errorf("%s: %w", parent.id, err)
	}
	if err != nil {
		return Session{}, fmt.Errorf("engine: copying the session's files: %w", err)
	}
	req := parent.req
	req.Caller = parent.caller
	s, err := m.launch(ctx, req)
	if err != nil {
		return Session{}, err
	}
	defer s.run.Unlock()
	parent.mu.Lock()
	n := parent.count
	parent.mu.Unlock()
	loaded, err := m.forkInto(ctx, pk, s.kernel(), n+1, files)
	if err != nil {
		m.endSession(s, "fork failed")
		select {
		case <-pk.proc.Done():
			// The parent's interpreter ended while its state was read
			// (as a snapshot's, Snapshot): the parent ends. Not when only
			// the child's did (out of memory loading the state, say).
			m.endSession(parent, "its interpreter ended while its state was saved")
			// Not the child's error (ErrForkEnded, "the session is
			// unchanged"), though the child ended as well: the session
			// did not stay as it was. It is logged.
			m.log.Info("a session's interpreter ended while it was forked; it ends", "session_id", parent.id, "err", err)
			return Session{}, fmt.Errorf("%w: %s: its interpreter ended while it was forked", ErrEnded, parent.id)
		default:
		}
		if errors.Is(err, ErrForkEnded) {
			return Session{}, fmt.Errorf("%s: %w", parent.id, err) // it keeps its kernel
		}
		return Session{}, fmt.Errorf("engine: forking session %s: %w", parent.id, err)
	}
	s.mu.Lock()
	s.count, s.forkedFrom, s.last = n, parent.id, run.Now()
	s.mu.Unlock()
	m.log.Info("session forked", "session_id", s.id, "parent", parent.id, "caller", s.caller)
	info := s.Info()
	info.Skipped = loaded.Skipped
	return info, nil
}

// forkInto writes files into child's workspace, then streams from's state
// into it as pyexec's own cell n of both, within ctx.
func (m *Service) forkInto(ctx context.Context, from, child *kernel, n int, files []sandbox.File) (runner.Loaded, error) {
	// The files first: loading imports the user's own modules from them.
	if len(files) > 0 {
		if err := child.proc.WriteFiles(files); err != nil {
			return runner.Loaded{}, fmt.Errorf("writing the workspace: %w", err)
		}
	}
	loaded, stop := child.expectLoaded()
	defer stop()
	c := child.startOwn(n)
	defer child.finish(c)
	// A child that stops reading blocks the parent's channel: it is
	// killed before the parent's own save would be.
	kill := time.AfterFunc(m.cfg.SaveTimeout, child.proc.Kill)
	defer kill.Stop()
	pctx, cancel := m.detached(ctx) // the parent's save: not cut short by its client
	defer cancel()
	err := m.saveState(pctx, from, n, func(meta runner.StateMeta) (io.Writer, error) {
		if err := child.proc.Send(runner.LoadRequest(n, meta.Bytes)); err != nil {
			return nil, err
		}
		return statePipe{from: from.proc, to: child.proc}, nil
	})
	if err != nil {
		if childEnded(ctx, child, err) { // it ended as it took the state: the parent's save could not go on
			return runner.Loaded{}, forkEnded(child)
		}
		child.proc.Kill()
		return runner.Loaded{}, err
	}
	rep, err := child.awaitOwn(ctx, c, m.cfg.SaveTimeout, m.cfg.InterruptGrace)
	if errors.Is(err, errKernelEnded) && ctx.Err() == nil {
		return runner.Loaded{}, forkEnded(child)
	}
	if err != nil {
		return runner.Loaded{}, err
	}
	return loaded(rep)
}

// forkEndWait bounds how long a fork waits for the end of a child whose
// request pipe was found closed to be known.
const forkEndWait = 2 * time.Second

// childEnded reports whether child, into which a fork's state could not
// be written (err), has ended. A closed request pipe (EPIPE) is its
// interpreter ending, whose end is told only once its jail is torn down:
// that is waited for, at most forkEndWait or until ctx ends. Any other
// error, or a child still there then, is the fork's own failure.
func childEnded(ctx context.Context, child *kernel, err error) bool {
	select {
	case <-child.proc.Done():
		return true
	default:
	}
	if !errors.Is(err, io.ErrClosedPipe) && !errors.Is(err, syscall.EPIPE) {
		return false
	}
	t := time.NewTimer(forkEndWait)
	defer t.Stop()
	select {
	case <-child.proc.Done():
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// forkEnded is ErrForkEnded for child, whose interpreter ended while it
// loaded a fork's state, saying how it ended.
func forkEnded(child *kernel) error {
	<-child.ended // its result is read
	r := child.res
	how := fmt.Sprintf("exit code %d", r.ExitCode)
	switch {
	case r.Status == sandbox.StatusOOM:
		how = "out of memory (" + r.Reason + ")"
	case r.Signal != 0:
		how = fmt.Sprintf("killed by signal %d (%s)", r.Signal, syscall.Signal(r.Signal))
	}
	return fmt.Errorf("%w: %s; a state holding an object whose unpickling ends the process (os._exit, a crash), needs more than the session's memory or outlasts the save timeout cannot be forked; the session is unchanged",
		ErrForkEnded, how)
}

// statePipe passes a fork's state from the parent's channel into the
// child's request pipe: what the parent's channel already delivered
// (Write), then the rest within the kernel, without a copy here (Pull).
type statePipe struct{ from, to *sandbox.Process }

func (s statePipe) Write(p []byte) (int, error) {
	if err := s.to.Send(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (s statePipe) Pull(n int64) (int64, error) { return s.from.SpliceChannel(s.to, n) }
