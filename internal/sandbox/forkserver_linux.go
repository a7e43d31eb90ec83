package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A Template is a fork server: a process in a jail of its own that loaded
// an interpreter (and whatever it preloads) once and never runs user code.
// Each execution is a child forked from it which, before any user code,
// builds the isolation of a cold jail for itself:
//
//	template (uid 0; SYS_ADMIN, SETUID, SETGID, SETPCAP, KILL, NET_ADMIN;
//	│         no_new_privs; in the template jail's namespaces and cgroup)
//	└─ reaper: PID 1 of a new pid namespace, new mount, IPC, UTS and
//	   │       (without network) network namespaces; fresh /work, /tmp,
//	   │       /dev/shm; a new /proc with the same masks; once the parent
//	   │       moved it into the execution's cgroup, a cgroup namespace
//	   │       rooted there; reports on its status pipe; kills what the
//	   │       payload leaves
//	   └─ payload: setsid, rlimits, empty bounding/ambient sets, uid and
//	              gid of the sandbox user (clearing every capability),
//	              Landlock, no_new_privs, the same seccomp filter; then it
//	              waits for its request on fd 4 like a warm runner
//
// The parent moves the reaper into the execution's own cgroup before it
// forks the payload (which is born there), writes the execution's files
// and hands it its request (Process.HandOff), exactly as for a prepared
// jail. The Python side is internal/runner's forkserver.py.
//
// A fork server needs a root server (no user namespace) and isolation;
// StartTemplate reports ErrUnsupported otherwise.
type Template struct {
	m    *Manager
	base Base
	jail *Jail
	proc *Process
	conn *net.UnixConn
	said *limitedBuffer // the start of what the server wrote to stderr
	// preloads are the modules the server's environment has of those its
	// command line names, as it reported when ready.
	preloads []string
	// precopy is how many bytes each execution copies ahead (its probe's
	// list); precopyOff why none, when its probe failed.
	precopy    int64
	precopyOff string

	mu sync.Mutex // one fork request and its reply at a time on conn
	// replyBuf is what replies are read into, under mu (or before the
	// template is shared): one datagram, which must fit whole.
	replyBuf []byte
}

// forkConfig is the first message a fork server receives: what every
// execution applies to itself.
type forkConfig struct {
	UID          int           `json:"uid"`
	GID          int           `json:"gid"`
	Hostname     string        `json:"hostname"`
	Seccomp      []byte        `json:"seccomp"` // struct sock_filter[]; empty: no filter
	Landlock     *landlockPlan `json:"landlock"`
	ProcMasked   []string      `json:"proc_masked"`
	ProcReadOnly []string      `json:"proc_read_only"`
	Bounding     []int         `json:"bounding"` // the server's bounding set, for its executions to drop
	Relay        string        `json:"relay"`    // where each reaper serves its payload's pipes (relayPath)
	// Slots: the server's /workspace is its jail's workspace slot, which
	// every execution drops from its namespace; no forked execution
	// has a workspace (slots_linux.go).
	Slots bool `json:"slots,omitempty"`
}

// forkRequest asks for one execution; its descriptors travel with it.
type forkRequest struct {
	WorkspaceBytes  int64  `json:"workspace_bytes"`
	WorkspaceInodes int64  `json:"workspace_inodes"`
	ShmBytes        int64  `json:"shm_bytes"`
	OpenFiles       int64  `json:"open_files"`
	FileSizeBytes   int64  `json:"file_size_bytes"`
	CPUSeconds      int64  `json:"cpu_seconds"`
	Dir             string `json:"dir"`
	Collect         bool   `json:"collect"`
	Channel         bool   `json:"channel"` // the reaper serves the payload its result channel
	// Args, if set, are the driver's arguments instead of waiting for a
	// request (a session's kernel: "--session 4 ..."); Env are KEY=value
	// additions to the server's environment, set before the driver runs.
	Args []string `json:"args,omitempty"`
	Env  []string `json:"env,omitempty"`
	// PrecopyBudget is how many bytes of the pages the server's probe
	// listed the execution may copy while it waits (all or none).
	PrecopyBudget int64 `json:"precopy_budget"`
}

// PrecopyShare is the share of an execution's memory limit that copying
// ahead may take: a forked execution copies the pages its fork server's
// probe listed only when they are at most 1/PrecopyShare of the memory
// limit it starts with, so that the copies never bring an execution near
// its limit before its code ran.
const PrecopyShare = 4

// PrecopyFits reports whether an execution with memory limit mem copies
// ahead the bytes its fork server's probe listed (Template.Precopy): some,
// and at most 1/PrecopyShare of mem.
func PrecopyFits(bytes, mem int64) bool { return bytes > 0 && bytes <= mem/PrecopyShare }

// forkReply answers the configuration (Ready) and each fork request (Pid,
// with a pidfd of the reaper attached).
type forkReply struct {
	Ready    bool     `json:"ready,omitempty"`
	Preloads []string `json:"preloads,omitempty"` // with Ready
	// With Ready: the bytes each execution copies ahead, or why none
	// (the probe failed).
	Precopy    int64  `json:"precopy,omitempty"`
	PrecopyOff string `json:"precopy_off,omitempty"`
	Pid        int    `json:"pid,omitempty"`
	Error      string `json:"error,omitempty"`
}

// templateStartTimeout bounds a fork server's start-up, preloading
// included (numpy, pandas and matplotlib take seconds on a cold cache).
const templateStartTimeout = 3 * time.Minute

// StartTemplate starts a fork server running spec (its Argv and Stdin are
// the server's program, see runner.ForkServerArgv; Stdin is closed once
// written). out receives what the server itself prints. Executions are
// then Forked from it until Close.
func (m *Manager) StartTemplate(ctx context.Context, spec Spec, out OutputFunc) (_ *Template, retErr error) {
	if m.cfg.Unsafe || m.userns || m.cfg.UID == 0 {
		return nil, fmt.Errorf("%w: a fork server needs isolation and a server running as root", ErrUnsupported)
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	// With network, the server's root has the egress's resolv.conf and
	// CA certificates, but its namespace only a loopback and never an
	// egress: each execution makes a network namespace of its own, where
	// its egress is attached at hand-off (AttachEgress).
	base := Base{Mounts: spec.Mounts, Network: spec.Network}
	j, err := m.prepare(ctx, base, true)
	if err != nil {
		return nil, err
	}
	spec.Requests, spec.ResultChannel, spec.StreamChannel, spec.Collect = false, false, false, nil
	// What the server prints goes to out as it comes, with no cap that
	// could end it; the first of its stderr is kept to explain a failure.
	spec.LiveOnly = true
	said := &limitedBuffer{max: 8 << 10}
	live := func(s Stream, b []byte) {
		if s == Stderr {
			said.Write(b)
		}
		if out != nil {
			out(s, b)
		}
	}
	// The server lives until Close, not until the start's ctx ends.
	p, err := j.launch(context.WithoutCancel(ctx), spec, live, true)
	if err != nil {
		j.Close()
		return nil, err
	}
	// Its program (runner.ForkServerStdin), read before anything else; the
	// writer ends when the server has read it all or died.
	go p.feedStdin(spec.Stdin)
	t := &Template{m: m, base: base, jail: j, proc: p, said: said}
	defer func() {
		if retErr != nil {
			t.Close()
		}
	}()
	c, err := net.FileConn(j.forkSock)
	if err != nil {
		return nil, fmt.Errorf("fork server socket: %w", err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, errors.New("fork server socket is not a unix socket")
	}
	t.conn = uc
	cfg, err := t.config()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(templateStartTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = t.conn.SetDeadline(deadline)
	if _, err := t.conn.Write(b); err != nil {
		return nil, t.died("configuring the fork server", err)
	}
	reply, _, err := t.readReply()
	if err != nil {
		return nil, t.died("starting the fork server", err)
	}
	if !reply.Ready {
		return nil, fmt.Errorf("%w: fork server: %s", ErrUnsupported, reply.Error)
	}
	t.preloads = reply.Preloads
	t.precopy, t.precopyOff = reply.Precopy, reply.PrecopyOff
	return t, nil
}

// config is what each execution of t applies to itself; the same layers,
// in the same form, as a cold jail.
func (t *Template) config() (forkConfig, error) {
	cfg := forkConfig{UID: t.m.cfg.UID, GID: t.m.cfg.GID, Hostname: "pyexec",
		ProcMasked: procMasked, ProcReadOnly: procReadOnly, Bounding: forkServerCaps, Relay: relayPath,
		Slots: t.jail.slot != ""}
	if !t.m.cfg.Disable.NoSeccomp {
		raw, err := buildFilter()
		if err != nil {
			return cfg, err
		}
		cfg.Seccomp = filterBytes(raw)
	}
	if !t.m.cfg.Disable.NoLandlock {
		plan := planLandlock(t.base.Mounts)
		cfg.Landlock = &plan
	}
	return cfg, nil
}

// readReply reads one reply of the fork server and the descriptor that
// comes with it, if any (-1).
func (t *Template) readReply() (forkReply, int, error) {
	var reply forkReply
	if t.replyBuf == nil {
		t.replyBuf = make([]byte, 64<<10)
	}
	buf := t.replyBuf
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := t.conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return reply, -1, err
	}
	fd := -1
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return reply, -1, err
		}
		for _, m := range msgs {
			fds, err := unix.ParseUnixRights(&m)
			if err != nil {
				continue
			}
			for _, f := range fds {
				if fd < 0 {
					fd = f
				} else {
					unix.Close(f) // never more than one is sent
				}
			}
		}
	}
	if n == 0 {
		return reply, fd, errors.New("the fork server closed its socket")
	}
	if err := json.Unmarshal(buf[:n], &reply); err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		return reply, -1, fmt.Errorf("fork server reply: %w", err)
	}
	return reply, fd, nil
}

// died explains a broken fork server with what it printed.
func (t *Template) died(doing string, err error) error {
	select { // a server that broke its socket is ending: let it finish
	case <-t.Done():
	case <-time.After(time.Second):
		t.proc.Kill()
	}
	res := t.proc.Wait()
	if said := t.said.Bytes(); len(said) > 0 {
		return fmt.Errorf("%s: %w; it printed: %s", doing, err, said)
	}
	return fmt.Errorf("%s: %w (%s: %s)", doing, err, res.Status, res.Reason)
}

// Preloads are the modules of those its command line names that the fork
// server's environment has (runner.ForkServerArgv: the ones it imported;
// runner.LeanForkServerArgv: the ones it could have). The caller must not
// modify them.
func (t *Template) Preloads() []string { return t.preloads }

// Precopy is how many bytes each execution forked from the server copies
// while it waits for its request (the pages its probe found executions
// write), if its memory limit allows (PrecopyShare); 0 with the reason
// when its probe failed, 0 and "" when it ran none (no preloads).
func (t *Template) Precopy() (bytes int64, off string) { return t.precopy, t.precopyOff }

// Done is closed when the fork server has ended; it must then be replaced.
func (t *Template) Done() <-chan struct{} { return t.proc.Done() }

// MemoryUsage is what the fork server's own cgroup holds, in bytes.
func (t *Template) MemoryUsage() int64 { return t.proc.MemoryUsage() }

// Close ends the fork server. Executions forked from it end with it: they
// live in nested pid namespaces of its jail.
func (t *Template) Close() error {
	if t.conn != nil {
		t.conn.Close()
	}
	t.proc.Kill()
	t.proc.Wait()
	return t.jail.Close()
}

// Fork starts one execution of spec from the fork server: its runner waits
// for its request on fd 4 (spec.Requests must be set) and gets it, with the
// execution's actual limits and files, from Process.HandOff. spec's limits
// are the ceilings the execution starts with; spec's mounts and network
// must be the template's. The returned Jail is Released by the caller.
//
// While it waits, the execution copies the pages the server's probe found
// executions write (see Precopy), when they take at most 1/PrecopyShare of
// spec's memory limit.
func (t *Template) Fork(ctx context.Context, spec Spec, out OutputFunc) (*Jail, *Process, error) {
	return t.fork(ctx, spec, out, nil, nil, true)
}

// ForkBare is Fork for an execution that copies nothing ahead: one whose
// code uses none of the preloads, or whose memory limit, once handed off,
// leaves no room for the copies.
func (t *Template) ForkBare(ctx context.Context, spec Spec, out OutputFunc) (*Jail, *Process, error) {
	return t.fork(ctx, spec, out, nil, nil, false)
}

// ForkKernel starts a long-lived payload from the fork server: the driver
// runs with args (say a session's "--session 4 --report-fd 3 ...") at
// once, in the server's environment plus env (KEY=value; the caller keeps
// PYTHON* variables out: they act at interpreter start only). Its
// isolation is a forked execution's; spec's limits are its own from the
// start (no hand-off tightens them). The caller writes spec.Files with
// Process.WriteFiles and talks to it with Send and Signal.
func (t *Template) ForkKernel(ctx context.Context, spec Spec, out OutputFunc, args, env []string) (*Jail, *Process, error) {
	if len(args) == 0 {
		return nil, nil, fmt.Errorf("%w: a kernel needs the driver's arguments", ErrInvalidSpec)
	}
	return t.fork(ctx, spec, out, args, env, false)
}

func (t *Template) fork(ctx context.Context, spec Spec, out OutputFunc, args, env []string, copyAhead bool) (_ *Jail, _ *Process, retErr error) {
	if err := spec.Validate(); err != nil {
		return nil, nil, err
	}
	if spec.Workspace != nil {
		// A fork server's /workspace would show every sibling's: a run
		// with a workspace takes a jail of its own (pool.go, sessions).
		return nil, nil, fmt.Errorf("%w: a forked execution has no workspace: it needs a jail of its own", ErrInvalidSpec)
	}
	if !spec.Requests {
		return nil, nil, fmt.Errorf("%w: a forked execution takes its work on its request pipe (Spec.Requests)", ErrInvalidSpec)
	}
	if !sameBase(t.base, Base{Mounts: spec.Mounts, Network: spec.Network}) {
		return nil, nil, fmt.Errorf("%w: mounts or network differ from the fork server's", ErrInvalidSpec)
	}
	m := t.m
	j := &Jail{m: m, id: m.jailPrefix() + newID(), base: t.base, used: true, template: t.jail,
		initDone: make(chan struct{}), initStderr: &limitedBuffer{max: 8 << 10}}
	defer func() {
		if retErr != nil {
			j.Close()
		}
	}()
	l := spec.Limits.WithDefaults()
	if m.cgroups != nil {
		cg, err := m.cgroups.Take(j.id, l.cgroup())
		if err != nil {
			return nil, nil, err
		}
		j.cg = cg
	}
	child, err := j.makePipes()
	if err != nil {
		return nil, nil, err
	}
	dir := spec.Dir
	if dir == "" {
		dir = WorkDir
	}
	req := forkRequest{WorkspaceBytes: l.WorkspaceBytes, WorkspaceInodes: l.WorkspaceInodes, ShmBytes: max(l.ShmBytes, 4096),
		OpenFiles: l.OpenFiles, FileSizeBytes: l.FileSizeBytes, CPUSeconds: int64(l.CPUTime.Seconds()) + 1,
		Dir: dir, Collect: spec.Collect != nil, Channel: spec.ResultChannel, Args: args, Env: env}
	if copyAhead {
		req.PrecopyBudget = l.MemoryBytes / PrecopyShare
	}
	pidfd, err := t.request(ctx, req, child)
	// The fork server has its copies (or failed): ours must go now, or the
	// status pipe would never reach EOF if the execution dies.
	for _, fd := range child {
		unix.Close(fd)
	}
	if err != nil {
		return nil, nil, err
	}
	r, err := newReaper(pidfd)
	if err != nil {
		unix.Close(pidfd)
		return nil, nil, err
	}
	j.reaper = r
	go func() {
		r.wait()
		close(j.initDone)
	}()
	j.wire = newWire(j.statusR, j.ctrlW)
	if err := j.place(); err != nil {
		if j.reaper.alive() != nil {
			// It ended on its own (its isolation failed): its status
			// pipe says why.
			if _, aerr := j.await(ctx, kindStarted); aerr != nil {
				err = aerr
			}
		}
		return nil, nil, fmt.Errorf("forking an execution: %w", err)
	}
	p := j.newProcess(ctx, spec, out)
	p.drain()
	msg, err := j.await(ctx, kindStarted)
	if err == nil && msg.Started == nil {
		err = errors.New("protocol: started message without a pid")
	}
	if err != nil {
		p.failed(err)
		return nil, nil, fmt.Errorf("forking an execution: %w", err)
	}
	p.running(msg.Started.Pid)
	return j, p, nil
}

// place moves a forked execution's reaper into the execution's cgroup and
// then tells it so on its release pipe: only then does it make its cgroup
// namespace and fork the payload, which is born in that cgroup. The reaper
// is named by a pid the fork server reaps: it is checked to be alive after
// the pid was written, so the pid was its own.
func (j *Jail) place() error {
	if j.cg != nil {
		if err := j.cg.Add(j.reaper.pid); err != nil {
			return err
		}
	}
	if err := j.reaper.alive(); err != nil {
		return err
	}
	if _, err := j.ctrlW.Write([]byte("p")); err != nil {
		return fmt.Errorf("releasing the reaper: %w", err)
	}
	return nil
}

// request sends one fork request with the execution's descriptors and
// returns the pidfd of its reaper.
func (t *Template) request(ctx context.Context, req forkRequest, fds [7]int) (int, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return -1, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.Done():
		return -1, errors.New("the fork server has ended")
	default:
	}
	deadline := time.Now().Add(10 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = t.conn.SetDeadline(deadline)
	if _, _, err := t.conn.WriteMsgUnix(b, unix.UnixRights(fds[:]...), nil); err != nil {
		return -1, t.died("sending to the fork server", err)
	}
	reply, fd, err := t.readReply()
	if err != nil {
		// A late reply would pair with the next request: this server is
		// no longer trusted to answer in order.
		return -1, t.died("fork server", err)
	}
	if reply.Error != "" || fd < 0 {
		if fd >= 0 {
			unix.Close(fd)
		}
		return -1, fmt.Errorf("fork server: %s", reply.Error)
	}
	return fd, nil
}
