package cgroups

import "strconv"

// The pids controller of a v2 jail: its bound on tasks, and the count
// that tells a vacated cgroup.

// setPids writes pids.max when it differs from what the cgroup was last
// given.
func (j *v2Jail) setPids(l Limits) error {
	if j.last.known && l.Pids == j.last.limits.Pids {
		return nil
	}
	return j.files.write(j.dir, "pids.max", strconv.FormatInt(l.Pids, 10))
}

// pidsCurrent is the number of tasks charged to the cgroup, zombies not
// yet reaped included.
func (j *v2Jail) pidsCurrent() (int64, error) {
	return j.files.readInt(j.dir, "pids.current")
}
