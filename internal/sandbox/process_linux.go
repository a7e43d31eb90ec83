package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pyexec/pyexec/internal/sandbox/cgroups"
	"golang.org/x/sys/unix"
)

// Talking to a running payload: the warm pool starts an interpreter ahead
// of time and hands it its request later (HandOff); a session keeps one
// interpreter for many cells (Send, Signal).

// Send writes b to the payload's request pipe (its fd 4; Spec.Requests).
func (p *Process) Send(b []byte) error {
	if !p.exec.Requests {
		return fmt.Errorf("%w: the payload has no request pipe (Spec.Requests)", ErrInvalidSpec)
	}
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	if _, err := p.j.reqW.Write(b); err != nil {
		return fmt.Errorf("sending to the payload: %w", err)
	}
	return nil
}

// CloseSend closes the request pipe: the payload reads EOF.
func (p *Process) CloseSend() error {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	return p.j.reqW.Close()
}

// WriteStdin writes to the payload's standard input.
func (p *Process) WriteStdin(b []byte) error {
	_, err := p.j.stdinW.Write(b)
	return err
}

// CloseStdin closes the payload's standard input.
func (p *Process) CloseStdin() error { return p.j.stdinW.Close() }

// Signal sends sig to the payload's process group (the payload leads its
// own session), e.g. SIGINT to interrupt a session's running cell. The
// payload is named by a descriptor of its /proc directory, not by its
// number, so a signal does not reach a process that got the number after
// the payload's group was gone (before Linux 6.9, see
// signalGroupByNumber).
func (p *Process) Signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return os.ErrProcessDone
	default:
	}
	p.pidMu.Lock()
	defer p.pidMu.Unlock()
	pd, err := p.payloadLocked()
	if err != nil {
		return err
	}
	return signalGroup(pd, p.hostPid, sig)
}

// signalGroup sends sig to the process group led by the process of dir,
// a /proc/<pid> directory (pid, its number). os.ErrProcessDone when the
// group is gone, even if another process has the number since.
func signalGroup(dir *os.File, pid int, sig syscall.Signal) error {
	err := unix.PidfdSendSignal(int(dir.Fd()), sig, nil, pidfdSignalProcessGroup)
	if errors.Is(err, unix.EINVAL) {
		return signalGroupByNumber(dir, pid, sig) // a kernel before 6.9: no group flag
	}
	return signalled("pidfd_send_signal", err)
}

// signalGroupByNumber is signalGroup without the group flag: the group is
// signalled by number, once its leader is seen alive through dir (the
// number is the leader's while it lives; what is left is the moment
// between the check and the kill).
func signalGroupByNumber(dir *os.File, pid int, sig syscall.Signal) error {
	if err := unix.PidfdSendSignal(int(dir.Fd()), 0, nil, 0); err != nil {
		return signalled("pidfd_send_signal", err)
	}
	return signalled("kill", unix.Kill(-pid, sig))
}

// signalled is the error of a signal's system call named call.
func signalled(call string, err error) error {
	switch {
	case errors.Is(err, unix.ESRCH):
		return os.ErrProcessDone // the payload ended, before Wait says so
	case err != nil:
		return os.NewSyscallError(call, err)
	}
	return nil
}

// pidfdSignalProcessGroup is the flag (Linux 6.9) that has
// pidfd_send_signal signal the process group the descriptor's process
// leads.
const pidfdSignalProcessGroup = 0x4

// MemoryUsage is the jail's current memory use in bytes (0 without a
// cgroup).
func (p *Process) MemoryUsage() int64 {
	var n int64
	_ = p.j.withCgroup(func(cg cgroups.Cgroup) error {
		n, _ = cg.Current()
		return nil
	})
	return n
}

// HandOff gives a started payload its actual run: it tightens the limits
// to l (cgroup memory, tasks and CPU, workspace sizes), writes files into
// the workspace, restarts the wall clock and the CPU budget, and sends
// request on the request pipe, which it then closes. Limits may only
// shrink (a warm jail is started with the pool's ceilings), but for the
// sizes of /work, /tmp and /dev/shm, which are set to l either way.
func (p *Process) HandOff(l Limits, files []File, request []byte) error {
	if err := p.Retune(l, files); err != nil {
		return err
	}
	if request != nil {
		if err := p.Send(request); err != nil {
			return err
		}
	}
	if p.exec.Requests {
		return p.CloseSend()
	}
	return nil
}

// Retune is HandOff without the request: the limits tightened to l, files
// written, the clocks restarted; the request pipe stays open (a session's
// kernel forked ahead of its session reads its cells there).
func (p *Process) Retune(l Limits, files []File) error {
	l = l.WithDefaults()
	if err := l.validate(); err != nil {
		return err
	}
	// The payload's rlimits were set when it started and cannot be changed
	// from outside (prlimit on another user's process is refused on hosts
	// whose LSM policy forbids it): a hand-off may not ask for less.
	// RLIMIT_CPU stays at the start value; the run's CPU budget is enforced
	// on the whole cgroup by the parent from the hand-off on.
	started := p.r.currentLimits()
	if l.OpenFiles < started.OpenFiles || l.FileSizeBytes < started.FileSizeBytes {
		return fmt.Errorf("%w: open files and file size limits cannot shrink after the payload started", ErrInvalidSpec)
	}
	for _, f := range files {
		if _, err := cleanInputPath(f.Path); err != nil {
			return err
		}
	}
	if err := p.j.withCgroup(func(cg cgroups.Cgroup) error { return cg.SetLimits(l.cgroup()) }); err != nil {
		return err
	}
	if !p.j.m.cfg.Unsafe {
		if err := p.resizeScratch(l); err != nil {
			return err
		}
		if err := p.j.writeFilesVia(files); err != nil {
			return fmt.Errorf("writing files: %w", err)
		}
		p.r.mu.Lock()
		p.handedFiles = files
		p.r.mu.Unlock()
	}
	p.r.mu.Lock()
	p.start = time.Now()
	p.r.mu.Unlock()
	select {
	case p.rearm <- l:
	case <-p.done:
		return os.ErrProcessDone
	}
	return nil
}

// scratchSize is the size and inode count of one tmpfs mount.
type scratchSize struct {
	dir         string
	size, nodes int64
}

// scratchSizes are the sizes of a jail's /work, /tmp and /dev/shm under l,
// as mountScratch and the fork server mount them.
func scratchSizes(l Limits) [3]scratchSize {
	return [3]scratchSize{
		{WorkDir, l.WorkspaceBytes, l.WorkspaceInodes},
		{"/tmp", l.WorkspaceBytes, l.WorkspaceInodes},
		{"/dev/shm", max(l.ShmBytes, 4096), l.WorkspaceInodes},
	}
}

// resizeScratch reconfigures the jail's /work, /tmp and /dev/shm to the
// sizes of l, skipping a mount already of that size (a request's
// /dev/shm is usually the pool's: three reconfigurations per hand-off
// were ≈ 3 % of a busy server's CPU). The parent cannot enter the jail's
// mount namespace, but it can pick the tmpfs superblocks through
// /proc/<init>/root and reconfigure them (fspick + fsconfig). A size below
// what is in use fails.
func (p *Process) resizeScratch(l Limits) error {
	want := scratchSizes(l)
	root := fmt.Sprintf("/proc/%d/root", p.j.initPid())
	for i, m := range want {
		if m == p.scratch[i] {
			continue
		}
		// Until this one is done its size is not known.
		p.scratch[i] = scratchSize{}
		fd, err := unix.Fspick(unix.AT_FDCWD, root+m.dir, unix.FSPICK_CLOEXEC|unix.FSPICK_NO_AUTOMOUNT|unix.FSPICK_SYMLINK_NOFOLLOW)
		if err != nil {
			return fmt.Errorf("resizing %s: %w", m.dir, os.NewSyscallError("fspick", err))
		}
		if err := p.j.stillAlive(); err != nil {
			unix.Close(fd)
			return err
		}
		err = unix.FsconfigSetString(fd, "size", strconv.FormatInt(m.size, 10))
		if err == nil {
			err = unix.FsconfigSetString(fd, "nr_inodes", strconv.FormatInt(m.nodes, 10))
		}
		if err == nil {
			err = unix.FsconfigReconfigure(fd)
		}
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("resizing %s: %w", m.dir, os.NewSyscallError("fsconfig", err))
		}
		p.scratch[i] = m
	}
	return nil
}

// writeFilesVia writes files into the jail's workspace from the host,
// through /proc/<init>/root, owned by the payload's host ids
// (PayloadOwner): the sandbox user's, or, when jails run in a user
// namespace (an unprivileged server), the server's own, which the
// payload's ids map to and the only ones such a server may give. os.Root
// keeps every path inside the workspace, whatever the payload put there.
func (j *Jail) writeFilesVia(files []File) error {
	if len(files) == 0 {
		return nil
	}
	root, err := j.openWork()
	if err != nil {
		return err
	}
	defer root.Close()
	uid, gid := j.m.PayloadOwner()
	w := newTreeWriter(root, uid, gid)
	defer w.close()
	return w.writeAll(files)
}

// payloadLocked returns a descriptor of the payload's /proc directory,
// opening it on first use (pidMu held). os.ErrProcessDone when it cannot
// be found: the payload is no longer the child of the jail's PID 1, or
// PID 1 is gone. The directory is the payload's own: read through it,
// its status names the jail's pid and PID 1 as its parent, and PID 1 is
// checked to be alive after, so that parent was the jail's.
func (p *Process) payloadLocked() (*os.File, error) {
	if p.payloadDir != nil {
		return p.payloadDir, nil
	}
	if p.pidClosed || p.nsPid <= 0 {
		return nil, os.ErrProcessDone
	}
	initPid := p.j.initPid()
	pid := p.j.payloadHostPid(p.nsPid)
	if pid <= 0 || initPid <= 0 {
		return nil, os.ErrProcessDone
	}
	dir, err := os.Open("/proc/" + strconv.Itoa(pid))
	if err != nil {
		return nil, os.ErrProcessDone
	}
	fd, err := unix.Openat(int(dir.Fd()), "status", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	var status []byte
	if err == nil {
		f := os.NewFile(uintptr(fd), "status")
		status, err = io.ReadAll(f)
		f.Close()
	}
	if err != nil || lastNSpid(status) != strconv.Itoa(p.nsPid) || statusField(status, "PPid") != strconv.Itoa(initPid) ||
		p.j.stillAlive() != nil {
		dir.Close()
		return nil, os.ErrProcessDone
	}
	p.payloadDir, p.hostPid = dir, pid
	return dir, nil
}

// forgetPayload closes the payload's /proc directory once the payload is
// gone; Signal says os.ErrProcessDone from then on.
func (p *Process) forgetPayload() {
	p.pidMu.Lock()
	defer p.pidMu.Unlock()
	if p.payloadDir != nil {
		p.payloadDir.Close()
		p.payloadDir = nil
	}
	p.pidClosed = true
}

// payloadHostPid finds the host pid of init's child with jail pid nsPid,
// from init's children list and their NSpid lines. Init has the payload
// and whatever was re-parented to it as children; the status is searched
// for its NSpid line only, not split into lines.
func (j *Jail) payloadHostPid(nsPid int) int {
	initPid := j.initPid()
	if initPid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(initPid) + "/task/" + strconv.Itoa(initPid) + "/children")
	if err != nil {
		return 0
	}
	want := strconv.Itoa(nsPid)
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		status, err := os.ReadFile("/proc/" + f + "/status")
		if err == nil && lastNSpid(status) == want {
			return pid
		}
	}
	return 0
}

// statusField is the value of field name of a /proc/<pid>/status ("" if
// it has none).
func statusField(status []byte, name string) string {
	_, rest, ok := bytes.Cut(status, []byte("\n"+name+":"))
	if !ok {
		return ""
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	return string(bytes.TrimSpace(line))
}

// lastNSpid is the last field of the NSpid line of a /proc/<pid>/status,
// the pid in the innermost pid namespace ("" without one).
func lastNSpid(status []byte) string {
	ids := strings.Fields(statusField(status, "NSpid"))
	if len(ids) == 0 {
		return ""
	}
	return ids[len(ids)-1]
}
