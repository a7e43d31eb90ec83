package cgroups

import (
	"fmt"
	"time"
)

// The cpu controller of a v2 jail: its bandwidth and the CPU time its
// tasks used.

// setCPU writes cpu.max when the quota differs from what the cgroup was
// last given.
func (j *v2Jail) setCPU(l Limits) error {
	quota, period := cpuQuota(l.CPUs)
	if oldQuota, _ := cpuQuota(j.last.limits.CPUs); j.last.known && quota == oldQuota {
		return nil
	}
	return j.files.write(j.dir, "cpu.max", fmt.Sprintf("%d %d", quota, period))
}

func (j *v2Jail) CPUUsage() (time.Duration, error) {
	total, err := j.cpuTotal()
	return j.base.cpuSince(total), err
}

// cpuTotal is the CPU time of every task the cgroup ever held.
func (j *v2Jail) cpuTotal() (time.Duration, error) {
	us, err := j.files.readKey(j.dir, "cpu.stat", "usage_usec")
	return time.Duration(us) * time.Microsecond, err
}
