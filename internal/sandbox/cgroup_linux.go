package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"golang.org/x/sys/unix"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/cgroups/v3"
)

// jailCgroup is one jail's cgroup. There is one implementation per cgroup
// version (cgroup_v1_linux.go, cgroup_v2_linux.go); both bound memory with
// no swap, the number of tasks, and CPU bandwidth.
type jailCgroup interface {
	// intoFD returns a directory fd for CLONE_INTO_CGROUP, or -1 when the
	// process must be added after it started (cgroup v1).
	intoFD() int
	// add moves a started process into the cgroup.
	add(pid int) error
	// setLimits applies the payload's limits (at hand-off).
	setLimits(l Limits) error
	// cpuUsage is the user+sys CPU time of every task so far.
	cpuUsage() (time.Duration, error)
	// current is the memory in use now, in bytes.
	current() (int64, error)
	// usage reports the peak memory and whether the kernel OOM-killed a task.
	usage() (peak int64, oomKilled bool, err error)
	// vacate kills whatever is left once the jail is dead and says why the
	// cgroup may not serve another execution (nil: it may): a task still
	// in it, or memory still charged to it (see spareMaxCharge).
	vacate() error
	// reuse readies a vacated cgroup for a new execution: its measures
	// start again from zero (peak reset, CPU and OOM kills counted from
	// now) and l is applied. An error leaves it fit only for destroy.
	reuse(l Limits) error
	// destroy kills whatever is left and removes the cgroup.
	destroy() error
}

// spareMaxCharge is the memory still charged to a vacated cgroup above
// which it is removed, not kept for another execution: the next one's
// memory limit and peak would otherwise include someone else's pages (page
// cache, kernel objects that outlived the jail).
const spareMaxCharge = 1 << 20

// baseline holds the cumulative counters of a reused cgroup when it was
// taken: an execution's CPU time and OOM kills are what it added since.
type baseline struct {
	cpu  time.Duration
	ooms int64
}

// cpuSince is the CPU time used since the baseline; a counter below it
// (never expected: the kernel's only grow) reads as none.
func (b baseline) cpuSince(total time.Duration) time.Duration {
	return max(total-b.cpu, 0)
}

// oomSince reports whether the kernel OOM-killed a task since the
// baseline.
func (b baseline) oomSince(kills int64) bool { return kills > b.ooms }

// cgroupDriver creates jail cgroups below the configured parent.
type cgroupDriver interface {
	create(id string, initial Limits) (jailCgroup, error)
	// sweep removes the jail cgroups whose names start with prefix that a
	// crashed predecessor left behind.
	sweep(prefix string) (int, error)
	// describe says what was found, for doctor.
	describe() string
}

// newCgroupDriver picks the implementation for the host's cgroup mode.
func newCgroupDriver(parent string) (cgroupDriver, error) {
	switch cgroups.Mode() {
	case cgroups.Unified:
		return newCgroupV2(parent)
	case cgroups.Legacy, cgroups.Hybrid:
		return newCgroupV1(parent)
	default:
		return nil, fmt.Errorf("%w: no cgroup hierarchy is mounted", ErrUnsupported)
	}
}

// cpuQuota turns a number of cores into a CFS quota for a 100 ms period.
func cpuQuota(cpus float64) (quota int64, period uint64) {
	const p = 100_000
	q := int64(cpus * p)
	if q < 1000 {
		q = 1000 // the kernel's minimum is 1 ms
	}
	return q, p
}

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

// noProcs checks strictly that a cgroup.procs file lists no task.
func noProcs(procsFile string) error {
	b, err := os.ReadFile(procsFile)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) > 0 {
		return fmt.Errorf("%s still lists tasks", procsFile)
	}
	return nil
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
