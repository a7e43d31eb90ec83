package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"github.com/pyexec/pyexec/internal/sandbox/cgroups"
	"golang.org/x/sys/unix"
)

// Manager starts jails. It is safe for concurrent use.
type Manager struct {
	cfg      Config
	initPath string
	cgroups  cgroupKeeper // nil when cgroups are disabled or in unsafe mode
	userns   bool         // the server is not root: jails get a user namespace
	slots    string       // the workspace slots directory, set up (slots_linux.go); "" without
	log      *slog.Logger
	releases sync.WaitGroup
	// chunks are the output captures' read buffers, reused across
	// executions (OutputFunc gets a slice valid during its call only).
	chunks sync.Pool
}

// chunk returns a capture's read buffer; the caller puts it back in
// m.chunks once its capture has drained.
func (m *Manager) chunk() *[]byte {
	if b, ok := m.chunks.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, captureChunk)
	return &b
}

var _ Runner = (*Manager)(nil)

// cgroupKeeper is what jails need of the manager of their cgroups
// (*cgroups.Manager): one for each jail, given back when it ends.
type cgroupKeeper interface {
	Take(id string, initial cgroups.Limits) (cgroups.Cgroup, error)
	Drop(cg cgroups.Cgroup) error
	Sweep(prefix string) (int, error)
	Close() error
	Reusing() bool
}

var _ cgroupKeeper = (*cgroups.Manager)(nil)

// New validates cfg and prepares the host side of the jail (the cgroup
// parent). It fails when a required layer is unavailable.
func New(cfg Config) (*Manager, error) {
	if cfg.UID == 0 {
		cfg.UID = 65534
	}
	if cfg.GID == 0 {
		cfg.GID = 65534
	}
	if cfg.CgroupParent == "" {
		cfg.CgroupParent = "pyexec"
	}
	if cfg.UID < 0 || cfg.GID < 0 {
		return nil, fmt.Errorf("%w: negative uid or gid", ErrInvalidSpec)
	}
	if cfg.SpareCgroups < 0 {
		return nil, fmt.Errorf("%w: negative number of spare cgroups", ErrInvalidSpec)
	}
	m := &Manager{cfg: cfg, initPath: cfg.InitPath, userns: os.Geteuid() != 0, log: cfg.Logger}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.initPath == "" {
		m.initPath = "/proc/self/exe"
	}
	if cfg.Unsafe {
		m.log.Warn("running payloads WITHOUT isolation: rlimits only (--unsafe-no-isolation)")
		return m, nil
	}
	if !cfg.Disable.NoCgroups {
		cg, err := cgroups.New(cgroups.Config{Parent: cfg.CgroupParent, Spares: cfg.SpareCgroups, Logger: m.log})
		if err != nil {
			return nil, fmt.Errorf("cgroups: %w", err)
		}
		if cfg.SpareCgroups > 0 && !cg.Reusing() {
			m.log.Info("the cgroups of finished jails are not reused: this kernel cannot reset their peak memory (see pyexec doctor)")
		}
		m.cgroups = cg
	}
	if m.errNoSlots() == nil {
		if err := m.openSlots(); err != nil {
			if m.cgroups != nil {
				_ = m.cgroups.Close()
			}
			return nil, err
		}
	}
	return m, nil
}

// Sweep removes what a crashed predecessor left behind: jail cgroups of
// this instance (see Config.Instance) and their processes. A jail's own
// mounts vanish with its mount namespace; the workspace slots, which live
// in the server's, are swept when the manager opens them (sweepSlots).
func (m *Manager) Sweep() (int, error) {
	if m.cgroups == nil {
		return 0, nil
	}
	// This manager's own spares carry the same prefix: they are removed
	// first, not counted, and not left in the list after the sweep.
	return m.cgroups.Sweep(m.jailPrefix())
}

// jailPrefix starts the name of every jail of this instance.
func (m *Manager) jailPrefix() string {
	if m.cfg.Instance == "" {
		return ""
	}
	return m.cfg.Instance + "-"
}

// Run runs one payload in a fresh jail and destroys the jail. The returned
// error is non-nil only for an invalid spec; every other failure is a
// Result with StatusSetupError.
func (m *Manager) Run(ctx context.Context, spec Spec, out OutputFunc) (Result, error) {
	if err := spec.Validate(); err != nil {
		return Result{}, err
	}
	if spec.Network && m.cfg.Unsafe {
		// Without a jail there is no network namespace to route through
		// an egress: the payload would have the host's network.
		return Result{Status: StatusSetupError, Reason: "network needs the jail: unsafe mode has no network namespace",
			ExitCode: -1}, nil
	}
	j, err := m.Prepare(ctx, Base{Mounts: spec.Mounts, Network: spec.Network})
	if err != nil {
		return Result{Status: StatusSetupError, Reason: err.Error(), ExitCode: -1}, nil
	}
	defer m.Release(j)
	if spec.Network && spec.Egress != nil {
		if err := j.AttachEgress(spec.Egress); err != nil {
			return Result{Status: StatusSetupError, Reason: err.Error(), ExitCode: -1}, nil
		}
	}
	return j.Run(ctx, spec, out)
}

// Release closes j in the background: every process of it is already gone
// once its payload's Result is known, and the caller need not wait for the
// kernel to remove the cgroup. Wait waits for every release.
func (m *Manager) Release(j *Jail) {
	m.releases.Add(1)
	go func() {
		defer m.releases.Done()
		if err := j.Close(); err != nil {
			m.log.Warn("removing a jail", "jail", j.id, "err", err)
		}
	}()
}

// Wait blocks until every jail given to Release is removed.
func (m *Manager) Wait() { m.releases.Wait() }

// Close waits for every jail given to Release (Wait) and removes the
// cgroups kept for reuse. Jails made after it get new cgroups and remove
// them when they end.
func (m *Manager) Close() error {
	m.Wait()
	err := m.closeSlots()
	if m.cgroups != nil {
		err = errors.Join(err, m.cgroups.Close())
	}
	return err
}

// Jail is a started jail whose init waits for its one payload. A warm pool
// keeps prepared jails and hands each to exactly one Run.
type Jail struct {
	m    *Manager
	id   string
	base Base
	cmd  *exec.Cmd
	cg   cgroups.Cgroup
	wire *wire

	// parent ends of the pipes
	ctrlW, statusR, stdinW, stdoutR, stderrR, chanR, reqW *os.File
	// forkSock is the parent's end of init's fdForkSock, only in a
	// Template's jail: its line to its fork server.
	forkSock *os.File
	// reaper is set for an execution forked by a Template: its PID 1 is a
	// fork of the template, not a Go init this process started; template
	// is then the fork server's jail.
	reaper   *reaper
	template *Jail
	// slot is the jail's workspace slot on the host ("" without slots);
	// wsMounted says a workspace is mounted on it (slots_linux.go).
	slot      string
	wsMounted bool

	initDone   chan struct{} // closed when init has exited and been waited for
	initStderr *limitedBuffer
	workHost   string // unsafe mode: the host directory used as workspace

	mu     sync.Mutex
	used   bool
	closed bool
	proc   *Process // the payload, once started
	// egressLink is the egress device made ahead (PrepareEgressLink),
	// until AttachEgress hands it to an egress or Close closes it.
	egressLink *os.File
}

// Prepare starts a jail for base and waits until its root is built and
// its init waits for a payload. The jail must be Run once or Closed.
func (m *Manager) Prepare(ctx context.Context, base Base) (*Jail, error) {
	return m.prepare(ctx, base, false)
}

// prepare is Prepare; withForkSock also gives init the socket a fork
// server talks on (fdForkSock), which only a Template's jail needs.
func (m *Manager) prepare(ctx context.Context, base Base, withForkSock bool) (_ *Jail, retErr error) {
	for _, mt := range base.Mounts {
		if err := mt.validate(); err != nil {
			return nil, err
		}
	}
	j := &Jail{m: m, id: m.jailPrefix() + newID(), base: base, initDone: make(chan struct{}), initStderr: &limitedBuffer{max: 8 << 10}}
	defer func() {
		if retErr != nil {
			j.Close()
		}
	}()
	if m.cgroups != nil {
		cg, err := m.cgroups.Take(j.id, DefaultLimits().cgroup())
		if err != nil {
			return nil, err
		}
		j.cg = cg
	}
	if m.cfg.Unsafe {
		dir, err := os.MkdirTemp("", "pyexec-work-")
		if err != nil {
			return nil, err
		}
		j.workHost = dir
		if err := os.Chown(dir, m.cfg.UID, m.cfg.GID); err != nil && !m.userns {
			return nil, err
		}
	}
	if err := j.makeSlot(m.slots); err != nil {
		return nil, err
	}
	if err := j.start(withForkSock); err != nil {
		return nil, err
	}
	setup := &setupMsg{
		Slot:     j.slot,
		RootDir:  j.workHost,
		Mounts:   base.Mounts,
		Network:  base.Network,
		UID:      m.cfg.UID,
		GID:      m.cfg.GID,
		Hostname: "pyexec",
		Unsafe:   m.cfg.Unsafe,
		Layers:   m.cfg.Disable,
	}
	if m.userns {
		setup.UID, setup.GID = 0, 0 // the only ids mapped in the user namespace
	}
	if err := j.send(ctx, message{Kind: kindSetup, Setup: setup}); err != nil {
		return nil, err
	}
	if _, err := j.await(ctx, kindReady); err != nil {
		return nil, err
	}
	return j, nil
}

// start creates the pipes (and, withForkSock, the fork server's socket)
// and starts init in its namespaces and cgroup.
func (j *Jail) start(withForkSock bool) error {
	m := j.m
	pipes, err := j.makePipes()
	if err != nil {
		return err
	}
	child := make([]*os.File, 0, len(pipes)+1) // init's ends, in fd order from fdControl
	for _, fd := range pipes {
		child = append(child, os.NewFile(uintptr(fd), "pipe"))
	}
	defer func() {
		for _, f := range child {
			f.Close() // init has its own copies now
		}
	}()
	if withForkSock {
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("creating socket pair: %w", os.NewSyscallError("socketpair", err))
		}
		j.forkSock = os.NewFile(uintptr(pair[0]), "fork socket")
		child = append(child, os.NewFile(uintptr(pair[1]), "fork socket"))
	}
	cmd := exec.Command(m.initPath, InitArg)
	cmd.Args[0] = "pyexec"
	cmd.Env = []string{} // nothing of the server's environment enters the jail
	cmd.ExtraFiles = child
	cmd.Stderr = j.initStderr
	// A session of its own: a jail never receives what a terminal sends
	// its foreground process group (Ctrl-C in the terminal of a server
	// started by hand would otherwise interrupt every jail at once; init
	// forwards SIGINT to its payload). Only this server stops a jail.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if !m.cfg.Unsafe {
		// No CLONE_NEWCGROUP here: a namespace made at clone is rooted at
		// the server's cgroup. init makes its own once it is in the jail's.
		// Every jail has a network namespace of its own, with network on
		// too: its route out, if any, is a device the server serves
		// (AttachEgress), never the host's network.
		flags := uintptr(unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWNET)
		if m.userns {
			flags |= unix.CLONE_NEWUSER
			cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
			cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
			cmd.SysProcAttr.GidMappingsEnableSetgroups = false
		}
		cmd.SysProcAttr.Cloneflags = flags
	}
	if j.cg != nil && j.cg.IntoFD() >= 0 {
		// cgroup v2: the child is born inside its cgroup (CLONE_INTO_CGROUP),
		// so not one instruction of it runs unconfined.
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = j.cg.IntoFD()
	}
	if err = cmd.Start(); err != nil {
		return fmt.Errorf("starting jail init: %w", err)
	}
	j.cmd = cmd
	go func() {
		_ = cmd.Wait()
		close(j.initDone)
	}()
	if j.cg != nil && j.cg.IntoFD() < 0 {
		// cgroup v1: init waits for its setup message, which is sent only
		// after this, so it runs nothing of substance before confinement.
		if err := j.cg.Add(cmd.Process.Pid); err != nil {
			return err
		}
	}
	j.wire = newWire(j.statusR, j.ctrlW)
	return nil
}

// initPid is the host pid of the jail's PID 1 (its Go init, or the
// reaper of a forked execution), 0 before it started.
func (j *Jail) initPid() int {
	if j.reaper != nil {
		return j.reaper.pid
	}
	if j.cmd == nil || j.cmd.Process == nil {
		return 0
	}
	return j.cmd.Process.Pid
}

// makePipes creates the pipes between the parent and a jail's PID 1 and
// returns the jail's ends in the order of init's descriptors fdControl to
// fdRequests; the caller closes them once PID 1 has its copies. The
// jail's ends are bare descriptors, close-on-exec and blocking, as PID 1
// gets them: only the parent's ends are made non-blocking and given to
// the runtime's poller (os.Pipe would register and unregister both).
func (j *Jail) makePipes() (child [7]int, err error) {
	pipes := []struct {
		parentIsWriter bool
		parent         **os.File
		bulk           bool // a session's state crosses it (bulkPipe)
	}{
		{true, &j.ctrlW, false}, {false, &j.statusR, false}, {true, &j.stdinW, false},
		{false, &j.stdoutR, false}, {false, &j.stderrR, false}, {false, &j.chanR, true}, {true, &j.reqW, true},
	}
	for i, p := range pipes {
		var fds [2]int
		err := unix.Pipe2(fds[:], unix.O_CLOEXEC)
		if err == nil {
			ours, theirs := fds[0], fds[1]
			if p.parentIsWriter {
				ours, theirs = theirs, ours
			}
			if p.bulk {
				bulkPipe(fds[1])
			}
			if err = unix.SetNonblock(ours, true); err == nil {
				// Non-blocking: os.NewFile makes it pollable.
				*p.parent, child[i] = os.NewFile(uintptr(ours), "pipe"), theirs
				continue
			}
			unix.Close(fds[0])
			unix.Close(fds[1])
		}
		for _, fd := range child[:i] {
			unix.Close(fd)
		}
		return child, fmt.Errorf("creating pipe: %w", os.NewSyscallError("pipe2", err))
	}
	return child, nil
}

// bulkPipeSize is the capacity of a jail's channel and request pipe (16
// pages by default): a session's state crosses them (its save, its
// restore, a fork), and each time a pipe fills both sides wait for each
// other; with 1 MiB they do so 16 times less often. The buffer's pages
// are taken only while they hold bytes.
const bulkPipeSize = 1 << 20

// bulkPipe gives the pipe whose write end is fd bulkPipeSize bytes, if
// the system lets it (an unprivileged server over its pipe quota keeps
// the default: only speed depends on it).
func bulkPipe(fd int) {
	_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETPIPE_SZ, bulkPipeSize)
}

// send writes a message to init.
func (j *Jail) send(ctx context.Context, msg message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := j.wire.send(msg); err != nil {
		return j.initFailure(err)
	}
	return nil
}

// await reads the next message from init, giving up when ctx ends (the
// jail is then killed, which unblocks the read).
func (j *Jail) await(ctx context.Context, kind msgKind) (message, error) {
	type res struct {
		m   message
		err error
	}
	ch := make(chan res, 1)
	go func() {
		m, err := j.wire.expect(kind)
		ch <- res{m, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			var ie *initError
			if errors.As(r.err, &ie) {
				return r.m, r.err
			}
			return r.m, j.initFailure(r.err)
		}
		return r.m, nil
	case <-ctx.Done():
		j.kill()
		<-ch
		return message{}, ctx.Err()
	}
}

// initFailure explains a broken pipe to init with what init printed.
func (j *Jail) initFailure(err error) error {
	j.kill()
	<-j.initDone
	if msg := bytes.TrimSpace(j.initStderr.Bytes()); len(msg) > 0 {
		return fmt.Errorf("jail init failed: %s (%w)", msg, err)
	}
	if j.cmd != nil && j.cmd.ProcessState != nil {
		return fmt.Errorf("jail init exited (%s): %w", j.cmd.ProcessState, err)
	}
	return fmt.Errorf("jail init: %w", err)
}

// kill ends init; the kernel then kills every process of its pid
// namespace.
func (j *Jail) kill() {
	if j.reaper != nil {
		j.reaper.kill()
		return
	}
	if j.cmd != nil && j.cmd.Process != nil {
		_ = j.cmd.Process.Signal(syscall.SIGKILL)
	}
}

// Close destroys the jail: init and every process of it, its cgroup and,
// in unsafe mode, its workspace. It is safe to call more than once.
func (j *Jail) Close() error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil
	}
	j.closed = true
	j.mu.Unlock()
	j.kill()
	if j.cmd != nil || j.reaper != nil {
		<-j.initDone
	}
	j.mu.Lock()
	p := j.proc
	j.mu.Unlock()
	if p != nil {
		<-p.released // its teardown reads the cgroup, then removes it
	}
	if j.reaper != nil {
		j.reaper.close()
	}
	j.mu.Lock()
	link := j.egressLink
	j.egressLink = nil
	j.mu.Unlock()
	for _, f := range []*os.File{j.ctrlW, j.statusR, j.stdinW, j.stdoutR, j.stderrR, j.chanR, j.reqW, j.forkSock, link} {
		if f != nil {
			f.Close()
		}
	}
	errs := []error{j.releaseCgroup(), j.removeSlot()}
	if j.workHost != "" {
		errs = append(errs, os.RemoveAll(j.workHost))
	}
	return errors.Join(errs...)
}

// cgroup returns the jail's cgroup while it exists.
func (j *Jail) cgroup() cgroups.Cgroup {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.cg
}

// withCgroup calls f with the jail's cgroup while it has one (else not),
// holding the jail's lock: releaseCgroup waits for f, so a cgroup kept for
// reuse is never given to another jail while f still acts on it.
func (j *Jail) withCgroup(f func(cgroups.Cgroup) error) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cg == nil {
		return nil
	}
	return f(j.cg)
}

// releaseCgroup kills anything left in the jail's cgroup and removes it
// or keeps it for reuse (cgroups.Manager.Drop), once; later calls do
// nothing.
func (j *Jail) releaseCgroup() error {
	j.mu.Lock()
	cg := j.cg
	j.cg = nil
	j.mu.Unlock()
	if cg == nil {
		return nil
	}
	return j.m.cgroups.Drop(cg)
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// limitedBuffer keeps the first max bytes written to it (init's stderr).
type limitedBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *limitedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

var _ io.Writer = (*limitedBuffer)(nil)
