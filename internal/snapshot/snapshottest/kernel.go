// Package snapshottest runs session kernels in real jails, forked from a
// fork server as the engine forks them, and saves, restores and forks
// their state the way the engine is to (internal/snapshot, runner's
// SaveRequest and LoadRequest): for the snapshot tests and bench/snapshot.
// It never runs in production code.
package snapshottest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/pool"
	"github.com/pyexec/pyexec/internal/runner"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/snapshot"
)

// EnvTarget is where a jail sees the Python environment.
const EnvTarget = "/opt/pyexec-snapshot-env"

// BaseEnv is every kernel's environment.
var BaseEnv = []string{"PATH=/usr/bin:/bin", "HOME=/work", "LANG=C.UTF-8"}

// Limits are every kernel's: room for a state of a few hundred MiB.
var Limits = sandbox.Limits{WallTime: 10 * time.Minute, CPUTime: 10 * time.Minute, MemoryBytes: 2 << 30, Pids: 64,
	CPUs: 2, WorkspaceBytes: 256 << 20, WorkspaceInodes: 16384, ShmBytes: 64 << 20, OpenFiles: 256,
	FileSizeBytes: 256 << 20, StdoutBytes: 1 << 20, StderrBytes: 1 << 20}

// Env forks kernels of one interpreter from one fork server.
type Env struct {
	Manager *sandbox.Manager
	Pool    *pool.Pool
	spec    sandbox.Spec
	parent  string
}

// NewEnv starts a pool whose fork server runs the python of the virtual
// environment at dir (with numpy and pandas, which it preloads), mounted
// at EnvTarget, or /usr/bin/python3 when dir is empty; cgroupParent names
// this process's cgroups. Close ends it all.
func NewEnv(dir, cgroupParent string) (*Env, error) {
	m, err := sandbox.New(sandbox.Config{CgroupParent: cgroupParent, SpareCgroups: 2})
	if err != nil {
		return nil, err
	}
	p := pool.New(m, pool.Config{BaseEnv: BaseEnv, ForkServer: true, Ceilings: Limits,
		Preload: []string{"numpy", "pandas"}, TrustedMount: func(string) bool { return true }, PrecopyProbe: -1})
	python, mounts := "/usr/bin/python3", []sandbox.Mount(nil)
	if dir != "" {
		python, mounts = filepath.Join(EnvTarget, "bin", "python3"), []sandbox.Mount{{Source: dir, Target: EnvTarget}}
	}
	return &Env{Manager: m, Pool: p, parent: cgroupParent, spec: sandbox.Spec{
		Argv:          runner.SessionArgv(python, runner.SessionOptions{}),
		Env:           BaseEnv,
		Dir:           sandbox.WorkDir,
		Mounts:        mounts,
		Limits:        Limits,
		ResultChannel: true,
		StreamChannel: true,
		Requests:      true,
		LiveOnly:      true,
	}}, nil
}

// Close ends the pool and the manager, and removes the cgroup parent
// (giving jails released in the background a few seconds to go first).
func (e *Env) Close() error {
	e.Pool.Close()
	err := e.Manager.Close()
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, werr error) error {
		if werr == nil && d.IsDir() && d.Name() == e.parent {
			for deadline := time.Now().Add(5 * time.Second); os.Remove(p) != nil && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
			}
			return filepath.SkipDir
		}
		return nil
	})
	return err
}

// Kernel is one session's interpreter in its jail.
type Kernel struct {
	jail    *sandbox.Jail
	proc    *sandbox.Process
	release func()
	scan    *runner.SessionScanner
	next    int

	mu  sync.Mutex
	cur *Cell
}

// Cell is one cell's outcome.
type Cell struct {
	N              int
	Stdout, Stderr bytes.Buffer
	Report         *runner.Report
	ends           int
	done           chan struct{}
}

// Start forks a new kernel: a jail made for it as for any new session.
func (e *Env) Start(ctx context.Context) (*Kernel, error) {
	k := &Kernel{}
	k.scan = runner.NewSessionScanner(func(runner.Output) {}, k.report)
	stdout := runner.NewCellSplitter(func(b []byte) { k.stream(b, false) }, k.end)
	stderr := runner.NewCellSplitter(func(b []byte) { k.stream(b, true) }, k.end)
	out := func(s sandbox.Stream, b []byte) {
		switch s {
		case sandbox.Stdout:
			stdout.Write(b)
		case sandbox.Stderr:
			stderr.Write(b)
		case sandbox.Channel:
			k.scan.Write(b)
		}
	}
	j, p, release, err := e.Pool.ForkSession(ctx, e.spec, out, true)
	if err != nil {
		return nil, err
	}
	if j == nil {
		return nil, errors.New("the kernel did not fork from the fork server")
	}
	k.jail, k.proc, k.release = j, p, release
	_ = p.CloseStdin()
	return k, nil
}

// Close kills the kernel and removes its jail.
func (k *Kernel) Close() {
	k.proc.Kill()
	k.proc.Wait()
	_ = k.jail.Close()
	k.release()
}

// Process is the kernel's process (its workspace, its memory).
func (k *Kernel) Process() *sandbox.Process { return k.proc }

func (k *Kernel) stream(b []byte, stderr bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if c := k.cur; c != nil {
		if stderr {
			c.Stderr.Write(b)
		} else {
			c.Stdout.Write(b)
		}
	}
}

func (k *Kernel) end(n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if c := k.cur; c != nil && c.N == n {
		c.ends++
		k.check(c)
	}
}

func (k *Kernel) report(n int, r runner.Report) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if c := k.cur; c != nil && c.N == n && c.Report == nil {
		c.Report = &r
		k.check(c)
	}
}

func (k *Kernel) check(c *Cell) {
	if c.Report != nil && c.ends == 2 {
		close(c.done)
		k.cur = nil
	}
}

// request sends what send writes as cell number n and waits for its end.
func (k *Kernel) request(ctx context.Context, send func(n int) error) (*Cell, error) {
	c := k.begin()
	if err := send(c.N); err != nil {
		return nil, err
	}
	return k.wait(ctx, c)
}

// begin makes the next cell the running one.
func (k *Kernel) begin() *Cell {
	k.next++
	c := &Cell{N: k.next, done: make(chan struct{})}
	k.mu.Lock()
	k.cur = c
	k.mu.Unlock()
	return c
}

// wait waits for c's end.
func (k *Kernel) wait(ctx context.Context, c *Cell) (*Cell, error) {
	select {
	case <-c.done:
		return c, nil
	case <-k.proc.Done():
		return nil, fmt.Errorf("the kernel ended: %+v", k.proc.Wait())
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Run runs code as a cell.
func (k *Kernel) Run(ctx context.Context, code string, eval bool) (*Cell, error) {
	return k.request(ctx, func(n int) error {
		return k.proc.Send(runner.Cell{Number: n, Code: code, EvalLastExpr: eval}.Frame())
	})
}

// Value runs expr and returns its repr, or the error the cell raised.
func (k *Kernel) Value(ctx context.Context, expr string) (string, error) {
	c, err := k.Run(ctx, expr, true)
	switch {
	case err != nil:
		return "", err
	case c.Report.Error != nil:
		return "", fmt.Errorf("%s: %s", c.Report.Error.Name, c.Report.Error.Value)
	case c.Report.Result == nil:
		return "None", nil
	}
	return *c.Report.Result, nil
}

// stateSink hands the state to dst and says when it has all gone by.
type stateSink struct {
	dst  io.Writer
	done chan error
}

func (s stateSink) Write(p []byte) (int, error) { return s.dst.Write(p) }
func (s stateSink) End(err error)               { s.done <- err }

// pullingSink is a stateSink whose destination takes the rest of the
// state itself (statePipe).
type pullingSink struct {
	stateSink
	p statePipe
}

func (s pullingSink) Pull(n int64) (int64, error) { return s.p.Pull(n) }

// SaveState makes the kernel save its state: begin receives what the
// kernel says of it and returns where its bytes go.
func (k *Kernel) SaveState(ctx context.Context, begin func(runner.StateMeta) (io.Writer, error)) error {
	done := make(chan error, 1)
	var beginErr error
	k.scan.ExpectState(func(m runner.StateMeta) runner.StateSink {
		w, err := begin(m)
		if err != nil {
			beginErr, w = err, io.Discard
		}
		if p, ok := w.(statePipe); ok {
			return pullingSink{stateSink{dst: w, done: done}, p}
		}
		return stateSink{dst: w, done: done}
	})
	c, err := k.request(ctx, func(n int) error { return k.proc.Send(runner.SaveRequest(n)) })
	if err != nil {
		return err
	}
	if c.Report.Error != nil {
		return fmt.Errorf("saving: %s: %s", c.Report.Error.Name, c.Report.Error.Value)
	}
	select {
	case err := <-done:
		return errors.Join(beginErr, err)
	default:
		return errors.New("the kernel wrote no state")
	}
}

// Save writes the kernel's snapshot, its state and its workspace, to dst
// for owner under key: what the engine does on a snapshot request.
func (k *Kernel) Save(ctx context.Context, dst io.Writer, key snapshot.Key, owner string, limit int64) (snapshot.Header, error) {
	buf := bufio.NewWriterSize(dst, 1<<20) // the channel delivers 32 KiB at a time
	var w *snapshot.Writer
	var h snapshot.Header
	err := k.SaveState(ctx, func(m runner.StateMeta) (io.Writer, error) {
		h = snapshot.Header{ID: snapshot.NewID(), Owner: owner, Created: time.Now().UTC(), ExecutionCount: k.next,
			Session: snapshot.Session{MemoryBytes: Limits.MemoryBytes}, Saved: m.Saved, Skipped: m.Skipped, StateBytes: m.Bytes}
		var err error
		w, err = snapshot.NewWriter(buf, key, h, limit)
		if err != nil {
			return nil, err
		}
		return w.State(), nil
	})
	if err != nil {
		return h, err
	}
	root, err := k.proc.Workspace()
	if err != nil {
		return h, err
	}
	defer root.Close()
	if err := snapshot.Tar(w.Files(), root, Limits.WorkspaceBytes); err != nil {
		return h, err
	}
	if _, err := w.Close(); err != nil {
		return h, err
	}
	return h, buf.Flush()
}

// Load makes the kernel load size bytes of state from state.
func (k *Kernel) Load(ctx context.Context, size int64, state io.Reader) (runner.Loaded, error) {
	var loaded runner.Loaded
	got := false
	k.scan.OnLoaded(func(l runner.Loaded) { loaded, got = l, true })
	c, err := k.request(ctx, func(n int) error { return runner.SendState(k.proc.Send, n, size, state) })
	if err != nil {
		return loaded, err
	}
	if c.Report.Error != nil {
		return loaded, fmt.Errorf("loading: %s: %s", c.Report.Error.Name, c.Report.Error.Value)
	}
	if !got {
		return loaded, errors.New("the kernel did not say what it loaded")
	}
	return loaded, nil
}

// Restore verifies the snapshot in file for owner under key and, only once
// it is verified, starts a new kernel, writes the snapshot's workspace
// into it and loads its state: what the engine does on a restore.
func (e *Env) Restore(ctx context.Context, file *os.File, key snapshot.Key, owner string, limit int64) (*Kernel, runner.Loaded, error) {
	st, err := file.Stat()
	if err != nil {
		return nil, runner.Loaded{}, err
	}
	s, err := snapshot.Open(file, st.Size(), key, owner, limit)
	if err != nil {
		return nil, runner.Loaded{}, err
	}
	files, err := snapshot.Untar(s.Files(), snapshot.UntarLimits{MaxFiles: int(Limits.WorkspaceInodes), MaxBytes: Limits.WorkspaceBytes})
	if err != nil {
		return nil, runner.Loaded{}, err
	}
	k, err := e.Start(ctx)
	if err != nil {
		return nil, runner.Loaded{}, err
	}
	if len(files) > 0 {
		sf := make([]sandbox.File, len(files))
		for i, f := range files {
			sf[i] = sandbox.File{Path: f.Path, Data: f.Data, Mode: f.Mode}
		}
		if err := k.proc.WriteFiles(sf); err != nil {
			k.Close()
			return nil, runner.Loaded{}, err
		}
	}
	loaded, err := k.Load(ctx, s.StateBytes, s.State())
	if err != nil {
		k.Close()
		return nil, loaded, err
	}
	return k, loaded, nil
}

// Fork starts a new kernel holding a copy of k's workspace and of its
// state, streamed from k's channel into the new kernel's request pipe as k
// writes it (no file, no MAC: the state never leaves this process).
func (e *Env) Fork(ctx context.Context, k *Kernel) (*Kernel, runner.Loaded, error) {
	child, err := e.Start(ctx)
	if err != nil {
		return nil, runner.Loaded{}, err
	}
	// The files first: loading imports the user's own modules from them.
	if err := copyWorkspace(k, child); err != nil {
		child.Close()
		return nil, runner.Loaded{}, err
	}
	// The parent's state goes to the child's request pipe as the parent's
	// channel delivers it: what the server read of it, then the rest
	// spliced from pipe to pipe, as the engine forks.
	var loaded runner.Loaded
	child.scan.OnLoaded(func(l runner.Loaded) { loaded = l })
	c := child.begin()
	err = k.SaveState(ctx, func(m runner.StateMeta) (io.Writer, error) {
		if err := child.proc.Send(runner.LoadRequest(c.N, m.Bytes)); err != nil {
			return nil, err
		}
		return statePipe{from: k.proc, to: child.proc}, nil
	})
	if err == nil {
		c, err = child.wait(ctx, c)
	}
	if err == nil && c.Report.Error != nil {
		err = fmt.Errorf("loading: %s: %s", c.Report.Error.Name, c.Report.Error.Value)
	}
	if err != nil {
		child.Close()
		return nil, loaded, err
	}
	return child, loaded, nil
}

// statePipe passes a state from one kernel's channel into another's
// request pipe.
type statePipe struct{ from, to *sandbox.Process }

func (s statePipe) Write(p []byte) (int, error) {
	if err := s.to.Send(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (s statePipe) Pull(n int64) (int64, error) { return s.from.SpliceChannel(s.to, n) }

// copyWorkspace copies from's workspace files into to's.
func copyWorkspace(from, to *Kernel) error {
	root, err := from.proc.Workspace()
	if err != nil {
		return err
	}
	defer root.Close()
	var buf bytes.Buffer
	if err := snapshot.Tar(&buf, root, Limits.WorkspaceBytes); err != nil {
		return err
	}
	files, err := snapshot.Untar(&buf, snapshot.UntarLimits{MaxFiles: int(Limits.WorkspaceInodes), MaxBytes: Limits.WorkspaceBytes})
	if err != nil || len(files) == 0 {
		return err
	}
	sf := make([]sandbox.File, len(files))
	for i, f := range files {
		sf[i] = sandbox.File{Path: f.Path, Data: f.Data, Mode: f.Mode}
	}
	return to.proc.WriteFiles(sf)
}
