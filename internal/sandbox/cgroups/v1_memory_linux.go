package cgroups

import (
	"fmt"
	"strconv"
)

// The memory controller of a v1 jail: its limit, with swap where the host
// accounts it, its use, its peak and the kernel's OOM kills.

// setMemory writes the memory limit when it differs from what the cgroup
// was last given. memory.memsw.limit_in_bytes may never be below
// memory.limit_in_bytes: raising both, memsw goes first; lowering, the
// plain limit goes first.
func (j *v1Jail) setMemory(l Limits) error {
	if j.last.known && l.MemoryBytes == j.last.limits.MemoryBytes {
		return nil
	}
	mem := strconv.FormatInt(l.MemoryBytes, 10)
	files := []string{"memory.limit_in_bytes"}
	if j.d.swap {
		files = append(files, "memory.memsw.limit_in_bytes")
		if j.last.known && l.MemoryBytes > j.last.limits.MemoryBytes {
			files[0], files[1] = files[1], files[0]
		}
	}
	for _, f := range files {
		if err := j.files.write(j.mem, f, mem); err != nil {
			return err
		}
	}
	return nil
}

func (j *v1Jail) Current() (int64, error) {
	return j.files.readInt(j.mem, "memory.usage_in_bytes")
}

func (j *v1Jail) Usage() (int64, bool, error) {
	peak, err := j.files.readInt(j.mem, "memory.max_usage_in_bytes")
	if err != nil {
		return 0, false, err
	}
	kills, err := j.oomKills()
	return peak, j.base.oomSince(kills), err
}

// oomKills is how many tasks the kernel OOM-killed in the cgroup so far.
func (j *v1Jail) oomKills() (int64, error) {
	return j.files.readKey(j.mem, "memory.oom_control", "oom_kill")
}

// resetPeak starts the peak again from the memory in use now, which is at
// most spareMaxCharge in a vacated cgroup: writing 0 does that on v1.
func (j *v1Jail) resetPeak() error {
	if err := j.files.write(j.mem, "memory.max_usage_in_bytes", "0"); err != nil {
		return fmt.Errorf("resetting the cgroup's peak memory: %w", err)
	}
	return nil
}
