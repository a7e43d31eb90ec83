package sandbox

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// applyRlimits sets the per-process limits the payload inherits. They are
// a second layer under the cgroup: core dumps off, a bound on open files,
// on the size of any one file, on the stack, and on each process's CPU time
// (the cgroup-wide CPU limit is enforced by the parent).
//
// syscall.Setrlimit, not unix.Setrlimit: for RLIMIT_NOFILE the Go runtime
// otherwise restores its saved startup limit in forked children.
func applyRlimits(l Limits) error {
	cpu := uint64(l.CPUTime.Seconds()) + 1
	set := []struct {
		name     string
		res      int
		cur, max uint64
	}{
		{"core", unix.RLIMIT_CORE, 0, 0},
		{"nofile", unix.RLIMIT_NOFILE, uint64(l.OpenFiles), uint64(l.OpenFiles)},
		{"fsize", unix.RLIMIT_FSIZE, uint64(l.FileSizeBytes), uint64(l.FileSizeBytes)},
		{"stack", unix.RLIMIT_STACK, 8 << 20, 8 << 20},
		{"cpu", unix.RLIMIT_CPU, cpu, cpu + 1},
	}
	for _, s := range set {
		if err := syscall.Setrlimit(s.res, &syscall.Rlimit{Cur: s.cur, Max: s.max}); err != nil {
			return fmt.Errorf("setrlimit %s: %w", s.name, os.NewSyscallError("setrlimit", err))
		}
	}
	return nil
}

// dropBoundingCaps empties the capability bounding set and the ambient set,
// so that nothing the payload executes can ever regain a capability. The
// payload's own permitted and effective sets are cleared by the uid change.
func dropBoundingCaps() error { return dropBoundingCapsExcept(nil) }

// forkServerCaps are what a fork server keeps to build each execution:
// mounts and namespaces (SYS_ADMIN), the uid change (SETUID, SETGID),
// emptying the child's bounding set (SETPCAP), killing what an execution
// left (KILL) and bringing up its loopback (NET_ADMIN).
var forkServerCaps = []int{unix.CAP_SYS_ADMIN, unix.CAP_SETUID, unix.CAP_SETGID, unix.CAP_SETPCAP, unix.CAP_KILL, unix.CAP_NET_ADMIN}

// dropBoundingCapsExcept is dropBoundingCaps keeping keep in the bounding
// set: a uid 0 process exec'd afterwards holds exactly those.
func dropBoundingCapsExcept(keep []int) error {
	last, err := lastCap()
	if err != nil {
		return err
	}
	for c := 0; c <= last; c++ {
		if slices.Contains(keep, c) {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("dropping capability %d from the bounding set: %w", c, os.NewSyscallError("prctl", err))
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return os.NewSyscallError("prctl(PR_CAP_AMBIENT_CLEAR_ALL)", err)
	}
	return nil
}

// lockRootCaps makes uid 0 an ordinary uid for capability purposes (used
// when the payload stays uid 0 inside a user namespace): exec does not
// grant root capabilities, and the setting cannot be undone.
func lockRootCaps() error {
	// From linux/securebits.h: NOROOT, NO_SETUID_FIXUP, KEEP_CAPS (each
	// with its LOCKED bit); x/sys/unix does not export them.
	const (
		secbitNoroot             = 1 << 0
		secbitNorootLocked       = 1 << 1
		secbitNoSetuidFixup      = 1 << 2
		secbitNoSetuidFixupLockd = 1 << 3
		secbitKeepCapsLocked     = 1 << 5
	)
	bits := secbitNoroot | secbitNorootLocked | secbitNoSetuidFixup | secbitNoSetuidFixupLockd | secbitKeepCapsLocked
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, uintptr(bits), 0, 0, 0); err != nil {
		return os.NewSyscallError("prctl(PR_SET_SECUREBITS)", err)
	}
	return nil
}

func lastCap() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
