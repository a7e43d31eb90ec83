package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// IsInit reports whether this process was started as a jail's init. The
// pyexec binary and every test binary that runs jails check it first
// thing (in main or TestMain) and then call Init.
func IsInit() bool {
	return len(os.Args) > 1 && os.Args[1] == InitArg
}

// Init is the body of PID 1 of a jail (the child side of spawn). It
// returns the process exit code. Failures are reported to the parent as a
// structured error message on the status pipe.
func Init() int {
	// no_new_privs, Landlock and the seccomp filter are applied to this
	// thread, and the payload is forked from it: it must stay this thread.
	runtime.LockOSThread()
	for fd := fdControl; fd <= fdForkSock; fd++ {
		unix.CloseOnExec(fd) // the payload must never inherit our pipes
	}
	// Nor anything the server itself inherited from whoever started it.
	if err := unix.CloseRange(fdForkSock+1, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		fmt.Fprintln(os.Stderr, "pyexec sandbox-init: close_range:", err)
		return 2
	}
	ctrl := os.NewFile(fdControl, "control")
	status := os.NewFile(fdStatus, "status")
	if ctrl == nil || status == nil {
		fmt.Fprintln(os.Stderr, "pyexec sandbox-init: not started by pyexec (missing control pipes)")
		return 2
	}
	w := newWire(ctrl, status)
	if err := runInit(w); err != nil {
		var ie *initError
		if !errors.As(err, &ie) {
			ie = &initError{Step: "init", Message: err.Error()}
		}
		_ = w.send(message{Kind: kindError, Error: ie})
		return 1
	}
	return 0
}

func runInit(w *wire) error {
	m, err := w.expect(kindSetup)
	if err != nil {
		return step("read setup", err)
	}
	setup := m.Setup
	if setup == nil {
		return step("read setup", errors.New("empty setup message"))
	}
	if !setup.Unsafe {
		if err := enterOwnCgroupNamespace(); err != nil {
			return err
		}
		if err := buildRoot(setup); err != nil {
			return err
		}
	}
	if err := w.send(message{Kind: kindReady}); err != nil {
		return err
	}
	m, err = w.expect(kindExec)
	if err != nil {
		return step("read exec", err)
	}
	if m.Exec == nil {
		return step("read exec", errors.New("empty exec message"))
	}
	// From the payload's start on, init must need no task it does not
	// have yet: the payload may take every pid left in the jail's cgroup
	// (a fork bomb at its limit), and a Go runtime that cannot start a
	// thread it needs ends the process, and with it the jail, before the
	// payload's exit is reported. So signals are caught, and the threads
	// the runtime will need are made, now.
	sigs := catchSignals()
	reserveThreads(spareThreads)
	pid, err := startPayload(setup, m.Exec)
	if err != nil {
		return err
	}
	if err := w.send(message{Kind: kindStarted, Started: &startedMsg{Pid: pid}}); err != nil {
		return err
	}
	exit := reap(pid, sigs)
	// Our own exit then tears down the pid namespace: every process the
	// payload left behind is killed by the kernel.
	if err := w.send(message{Kind: kindExit, Exit: &exit}); err != nil || m.Exec.Collect == nil {
		return err
	}
	return collectFiles(w, setup, m.Exec, pid)
}

// enterOwnCgroupNamespace gives init, and so everything of the jail, a
// cgroup namespace rooted at the cgroup it is in now: the parent placed it
// in the jail's cgroup before it sent the setup message (v1), or cloned it
// straight into it (v2). /proc/<pid>/cgroup then reads "/" for every
// hierarchy, and no path of the host's cgroup tree is visible inside.
func enterOwnCgroupNamespace() error {
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return step("cgroup namespace", os.NewSyscallError("unshare", err))
	}
	return nil
}

// startPayload prepares the workspace and starts the payload with every
// layer applied, in this order: scratch mounts and files (as root), then
// rlimits, the capability bounding set, Landlock, and last, as close to
// the exec as we can get, no_new_privs and the seccomp filter.
func startPayload(s *setupMsg, x *execMsg) (int, error) {
	workDir := WorkDir
	if s.Unsafe {
		workDir = s.RootDir
	} else if err := mountScratch(x.Limits, s.UID, s.GID); err != nil {
		return 0, err
	}
	if err := writeFiles(workDir, x.Files, s.UID, s.GID); err != nil {
		return 0, step("write files", err)
	}
	if err := applyRlimits(x.Limits); err != nil {
		return 0, step("rlimits", err)
	}
	userns := s.UID == 0 // only in a user namespace does the payload stay uid 0
	if x.ForkServer {
		return startForkServer(s, x, dir(x, workDir, s.Unsafe))
	}
	// Bound before Landlock, which would forbid making the socket.
	env, relayed := x.Env, false
	if !s.Unsafe && (x.Channel || x.Requests) {
		if err := startRelay(x); err != nil {
			return 0, step("relay", err)
		}
		env, relayed = append(env[:len(env):len(env)], relayEnv+"="+relayPath), true
	}
	if !s.Unsafe {
		if err := dropBoundingCaps(); err != nil {
			return 0, step("capabilities", err)
		}
		if userns {
			if err := lockRootCaps(); err != nil {
				return 0, step("capabilities", err)
			}
		}
		if !s.Layers.NoLandlock {
			if _, err := applyLandlock(s.Mounts); err != nil {
				return 0, step("landlock", err)
			}
		}
	}
	files := []*os.File{os.NewFile(fdStdin, "stdin"), os.NewFile(fdStdout, "stdout"), os.NewFile(fdStderr, "stderr")}
	if x.Channel || x.Requests {
		var ch *os.File // a nil entry leaves the payload's fd 3 closed
		if x.Channel && !relayed {
			ch = os.NewFile(fdChannel, "channel")
		}
		files = append(files, ch)
	}
	if x.Requests {
		// A warm runner reads its request here and closes it before user
		// code runs; a session's kernel closes it at once and fetches the
		// pipe from the relay for each cell.
		files = append(files, os.NewFile(fdRequests, "requests"))
	}
	attr := &os.ProcAttr{
		Dir:   dir(x, workDir, s.Unsafe),
		Env:   env,
		Files: files,
		Sys: &syscall.SysProcAttr{
			Setsid:    true,
			Pdeathsig: syscall.SIGKILL,
		},
	}
	if !userns {
		attr.Sys.Credential = &syscall.Credential{Uid: uint32(s.UID), Gid: uint32(s.GID), Groups: []uint32{}}
	}
	if !s.Unsafe && !s.Layers.NoSeccomp {
		filter, err := buildFilter()
		if err != nil {
			return 0, step("seccomp", err)
		}
		if err := loadSeccomp(filter); err != nil {
			return 0, step("seccomp", err)
		}
	} else if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 0, step("no_new_privs", os.NewSyscallError("prctl", err))
	}
	p, err := os.StartProcess(x.Argv[0], x.Argv, attr)
	if err != nil {
		return 0, step("exec", err)
	}
	return p.Pid, nil
}

// dir is the payload's working directory: x.Dir, or the workspace, mapped
// to the host workspace in unsafe mode.
func dir(x *execMsg, workDir string, unsafe bool) string {
	d := x.Dir
	if d == "" {
		d = workDir
	}
	if unsafe && (d == WorkDir || strings.HasPrefix(d, WorkDir+"/")) {
		d = filepath.Join(workDir, d[len(WorkDir):])
	}
	return d
}

// startForkServer starts a fork server (see Template): uid 0 with a
// bounding set of forkServerCaps only, so the exec leaves it exactly those
// capabilities, no_new_privs, rlimits already applied, and the socket to
// the parent as its fd 4. It never runs user code; every execution it
// forks drops all of this before any does.
func startForkServer(s *setupMsg, x *execMsg, dir string) (int, error) {
	if s.Unsafe || s.UID == 0 {
		return 0, step("fork server", errors.New("needs a jail without a user namespace (a root server)"))
	}
	if err := dropBoundingCapsExcept(forkServerCaps); err != nil {
		return 0, step("capabilities", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 0, step("no_new_privs", os.NewSyscallError("prctl", err))
	}
	files := []*os.File{os.NewFile(fdStdin, "stdin"), os.NewFile(fdStdout, "stdout"), os.NewFile(fdStderr, "stderr"),
		nil, os.NewFile(fdForkSock, "fork socket")}
	p, err := os.StartProcess(x.Argv[0], x.Argv, &os.ProcAttr{Dir: dir, Env: x.Env, Files: files,
		Sys: &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}})
	if err != nil {
		return 0, step("exec", err)
	}
	return p.Pid, nil
}

// writeFiles writes the workspace files, owned by the payload's user, and
// hands it the workspace itself. Paths were validated by the parent and
// are resolved inside an os.Root, so even a hostile name cannot leave it.
func writeFiles(dir string, files []File, uid, gid int) error {
	if len(files) == 0 {
		return nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	w := newTreeWriter(root, uid, gid)
	defer w.close()
	if err := w.writeAll(files); err != nil {
		return err
	}
	return root.Lchown(".", uid, gid)
}

// spareThreads is how many idle threads init leaves its Go runtime before
// it starts the payload (reserveThreads). Once it runs, init's runtime
// has at most one thread running Go code (GOMAXPROCS 1) besides those
// blocked for good (the reap loop's wait4, the relay's accept, the
// signal threads, sysmon): one for whichever goroutine wakes while
// another blocks, one for the collector, and room to spare.
const spareThreads = 4

// reserveThreads makes the Go runtime start n threads that then wait,
// idle, for work: the runtime takes an idle thread before it makes one,
// and never ends one. Each of n goroutines locks itself to a thread of
// its own and waits until all are locked, so n threads exist at once;
// unlocked, they go back to the runtime's idle list. With GOMAXPROCS 1,
// init then needs no new thread once its payload runs.
func reserveThreads(n int) {
	runtime.GOMAXPROCS(1)
	var locked, done sync.WaitGroup
	release := make(chan struct{})
	locked.Add(n)
	done.Add(n)
	for range n {
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			locked.Done()
			<-release
			runtime.UnlockOSThread()
		}()
	}
	locked.Wait()
	close(release)
	done.Wait()
}

// catchSignals starts catching the termination signals init forwards to
// the payload's session (reap), before the payload exists: catching them
// later starts a thread of the runtime's then.
func catchSignals() chan os.Signal {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT)
	return sigs
}

// reap waits for the payload, reaping every other process that is
// re-parented to us (we are PID 1), and forwards the termination signals
// caught on sigs to the payload's session.
func reap(pid int, sigs <-chan os.Signal) exitInfo {
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = unix.Kill(-pid, s.(syscall.Signal))
			case <-done:
				return
			}
		}
	}()
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			// ECHILD: the payload is gone without us seeing it; cannot
			// happen while it is our child, but never spin.
			return exitInfo{Signal: sigKill}
		}
		if got != pid {
			continue
		}
		if ws.Exited() {
			return exitInfo{Exited: true, ExitCode: ws.ExitStatus()}
		}
		if ws.Signaled() {
			return exitInfo{Signal: int(ws.Signal())}
		}
	}
}
