package cgroups

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// The memory controller of a v2 jail: its limit (swap is capped at 0 once,
// at create), its use, its peak and the kernel's OOM kills.

// setMemory writes memory.max when it differs from what the cgroup was
// last given.
func (j *v2Jail) setMemory(l Limits) error {
	if j.last.known && l.MemoryBytes == j.last.limits.MemoryBytes {
		return nil
	}
	return j.files.write(j.dir, "memory.max", strconv.FormatInt(l.MemoryBytes, 10))
}

func (j *v2Jail) Current() (int64, error) {
	return j.files.readInt(j.dir, "memory.current")
}

func (j *v2Jail) Usage() (int64, bool, error) {
	var peak int64
	var err error
	if j.peakReset {
		peak, err = j.files.readIntVia(j.peakKey())
	} else {
		// memory.peak exists since Linux 5.19; older kernels report 0.
		peak, err = j.files.readInt(j.dir, "memory.peak")
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, false, err
	}
	kills, err := j.oomKills()
	return peak, j.base.oomSince(kills), err
}

// oomKills is how many tasks the kernel OOM-killed in the cgroup so far.
func (j *v2Jail) oomKills() (int64, error) {
	return j.files.readKey(j.dir, "memory.events", "oom_kill")
}

// peakKey is the memory.peak descriptor that resets and reads the peak of
// a reused cgroup; each write through it starts the peak again.
func (j *v2Jail) peakKey() ctlKey { return ctlKey{j.dir, "memory.peak", unix.O_RDWR} }

// resetPeak starts the peak again from the memory in use now (at most
// spareMaxCharge in a vacated cgroup). Since Linux 6.12 a write to
// memory.peak does that for reads through the same descriptor; a later
// write through it restarts it again. A kernel that refuses switches reuse
// off for good.
func (j *v2Jail) resetPeak() error {
	j.peakReset = false
	if err := j.files.writeVia(j.peakKey(), "0"); err != nil {
		if _, serr := os.Stat(j.dir); serr == nil {
			// The kernel refused, not a cgroup removed meanwhile (Sweep).
			j.d.noPeakReset.Store(true)
		}
		return fmt.Errorf("resetting the cgroup's peak memory: %w", err)
	}
	j.peakReset = true
	return nil
}
