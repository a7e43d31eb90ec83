package cgroups

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// waitEmpty polls a cgroup.procs file until no task is left or the
// deadline passes. After init is killed the kernel tears the pid namespace
// down asynchronously, so rmdir right away would fail with EBUSY.
func waitEmpty(procsFile string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		b, err := os.ReadFile(procsFile)
		if err != nil || len(bytes.TrimSpace(b)) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s still has tasks after %s", procsFile, timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// vacated returns nil once a cgroup's pids.current (read by pids) reads 0 — no task is
// charged to it, a zombie not yet reaped included — waiting up to timeout
// for the last ones to be reaped, polling less often as it waits. Unlike
// waitEmpty, a file it cannot read is an error: the cgroup is then not
// reused.
func vacated(pids func() (int64, error), timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for pause := time.Millisecond; ; pause = min(2*pause, 8*time.Millisecond) {
		n, err := pids()
		switch {
		case err != nil:
			return err
		case n == 0:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("%d tasks still charged to the cgroup", n)
		}
		time.Sleep(pause)
	}
}

// chargeFree checks that at most spareMaxCharge bytes are charged to a
// cgroup, given how to read its memory use. The kernel frees a dead
// jail's kernel memory (task stacks, page tables) in RCU callbacks some
// milliseconds after its tasks were reaped: it waits up to timeout.
func chargeFree(usage func() (int64, error), timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		n, err := usage()
		switch {
		case err != nil:
			return err
		case n <= spareMaxCharge:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("%d bytes still charged to the cgroup", n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// killProcs sends SIGKILL to every pid listed in a cgroup.procs file.
func killProcs(procsFile string) {
	b, err := os.ReadFile(procsFile)
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			_ = killPid(pid)
		}
	}
}

// killPid sends SIGKILL; a process that is already gone is not an error.
func killPid(pid int) error {
	if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		return os.NewSyscallError("kill", err)
	}
	return nil
}

// rmdirRetry removes an empty cgroup directory; the kernel may report it
// busy for a moment after its last task exited.
func rmdirRetry(dir string) error {
	deadline := time.Now().Add(time.Second)
	for {
		err := unix.Rmdir(dir)
		switch {
		case err == nil || errors.Is(err, unix.ENOENT):
			return nil
		case errors.Is(err, unix.EBUSY) && time.Now().Before(deadline):
			time.Sleep(time.Millisecond)
		default:
			return os.NewSyscallError("rmdir", err)
		}
	}
}
