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

// applied is what SetLimits last wrote to a jail's cgroup: it writes only
// what differs, as a hand-off usually changes the memory and the CPU quota
// of the ceilings the cgroup was created with.
type applied struct {
	limits Limits
	// known is false before the first write and after a failed one: what
	// the cgroup holds is unknown, and every limit is written next time.
	known bool
}

// apply writes l with each controller's setter, in order; each skips what
// a says the cgroup holds already.
func (a *applied) apply(l Limits, setters ...func(Limits) error) error {
	for _, set := range setters {
		if err := set(l); err != nil {
			a.known = false
			return fmt.Errorf("setting cgroup limits: %w", err)
		}
	}
	a.limits, a.known = l, true
	return nil
}

// counters are what a jail's cgroup counted since it was made, read the
// way its cgroup version does.
type counters interface {
	resetPeak() error
	cpuTotal() (time.Duration, error)
	oomKills() (int64, error)
}

// newBaseline starts c's peak again and reads its counters now: from the
// baseline on, a reused cgroup measures only the execution it serves.
func newBaseline(c counters) (baseline, error) {
	if err := c.resetPeak(); err != nil {
		return baseline{}, err
	}
	cpu, err := c.cpuTotal()
	if err != nil {
		return baseline{}, fmt.Errorf("reading the cgroup's CPU time: %w", err)
	}
	kills, err := c.oomKills()
	if err != nil {
		return baseline{}, fmt.Errorf("reading the cgroup's OOM kills: %w", err)
	}
	return baseline{cpu: cpu, ooms: kills}, nil
}

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
