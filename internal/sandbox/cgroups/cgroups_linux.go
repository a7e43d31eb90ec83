package cgroups

import (
	"fmt"
	"time"

	"github.com/containerd/cgroups/v3"
)

// Cgroup is one jail's cgroup. There is one implementation per cgroup
// version (v1_linux.go, v2_linux.go); both bound memory with no swap, the
// number of tasks, and CPU bandwidth. A Cgroup comes from Manager.Take and
// goes back with Manager.Drop, which alone ends its use: the methods that
// empty, reset and remove it are the Manager's.
type Cgroup interface {
	// IntoFD returns a directory fd for CLONE_INTO_CGROUP, or -1 when the
	// process must be added after it started (cgroup v1).
	IntoFD() int
	// Add moves a started process into the cgroup.
	Add(pid int) error
	// SetLimits applies a payload's limits (at start and at hand-off).
	SetLimits(l Limits) error
	// CPUUsage is the user+sys CPU time of every task so far.
	CPUUsage() (time.Duration, error)
	// Current is the memory in use now, in bytes.
	Current() (int64, error)
	// Usage reports the peak memory and whether the kernel OOM-killed a task.
	Usage() (peak int64, oomKilled bool, err error)

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

// driver creates jail cgroups below the configured parent, one per cgroup
// version.
type driver interface {
	create(id string, initial Limits) (Cgroup, error)
	// sweep removes the jail cgroups whose names start with prefix that a
	// crashed predecessor left behind.
	sweep(prefix string) (int, error)
	// describe says what was found, for doctor.
	describe() string
	// reusable reports whether the kernel resets what a reused cgroup
	// measures.
	reusable() bool
}

// newDriver picks the implementation for the host's cgroup mode.
func newDriver(parent string) (driver, error) {
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
