package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// reaper is the PID 1 of a forked execution (see Template), held through a
// pidfd: it is the fork server's child, not ours, so it cannot be waited
// for, and its pid could be reused once the fork server reaped it.
type reaper struct {
	pidfd int
	pid   int // host pid, for /proc/<pid>/root and the cgroup
	once  sync.Once
}

// newReaper takes ownership of pidfd.
func newReaper(pidfd int) (*reaper, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", pidfd))
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Pid:"); ok {
			pid, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || pid <= 0 {
				return nil, errors.New("the forked execution ended at once")
			}
			return &reaper{pidfd: pidfd, pid: pid}, nil
		}
	}
	return nil, errors.New("not a pidfd")
}

// errReaperGone says a forked execution's reaper ended: its pid may name
// another process by now, so nothing opened through it may be used.
var errReaperGone = errors.New("the forked execution is gone")

// alive reports whether the reaper still runs. Checked after opening
// anything through /proc/<pid>: if it runs now, it ran at the open, and
// the pid was its own.
func (r *reaper) alive() error {
	if err := unix.PidfdSendSignal(r.pidfd, 0, nil, 0); err != nil {
		return errReaperGone
	}
	return nil
}

// kill ends the reaper; the kernel then kills its whole pid namespace.
func (r *reaper) kill() {
	_ = unix.PidfdSendSignal(r.pidfd, unix.SIGKILL, nil, 0)
}

// wait blocks until the reaper has exited.
func (r *reaper) wait() {
	fds := []unix.PollFd{{Fd: int32(r.pidfd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != unix.EINTR {
			return
		}
	}
}

func (r *reaper) close() {
	r.once.Do(func() { unix.Close(r.pidfd) })
}
