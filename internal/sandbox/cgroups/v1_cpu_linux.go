package cgroups

import (
	"strconv"
	"time"
)

// The cpu and cpuacct controllers of a v1 jail: its CFS bandwidth and the
// CPU time its tasks used.

// setCPU writes the CFS period once and the quota when it differs from
// what the cgroup was last given.
func (j *v1Jail) setCPU(l Limits) error {
	quota, period := cpuQuota(l.CPUs)
	if !j.last.known {
		if err := j.files.write(j.cpu, "cpu.cfs_period_us", strconv.FormatUint(period, 10)); err != nil {
			return err
		}
	}
	if oldQuota, _ := cpuQuota(j.last.limits.CPUs); j.last.known && quota == oldQuota {
		return nil
	}
	return j.files.write(j.cpu, "cpu.cfs_quota_us", strconv.FormatInt(quota, 10))
}

func (j *v1Jail) CPUUsage() (time.Duration, error) {
	total, err := j.cpuTotal()
	return j.base.cpuSince(total), err
}

// cpuTotal is the CPU time of every task the cgroup ever held.
func (j *v1Jail) cpuTotal() (time.Duration, error) {
	ns, err := j.files.readInt(j.acct, "cpuacct.usage")
	return time.Duration(ns), err
}
