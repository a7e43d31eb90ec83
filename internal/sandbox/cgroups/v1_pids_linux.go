package cgroups

import "strconv"

// The pids controller of a v1 jail: its bound on tasks, and the count
// that tells a vacated cgroup (every task of a jail enters this
// hierarchy, see v1Jail.vacate).

// setPids writes pids.max when it differs from what the cgroup was last
// given.
func (j *v1Jail) setPids(l Limits) error {
	if j.last.known && l.Pids == j.last.limits.Pids {
		return nil
	}
	return j.files.write(j.pids, "pids.max", strconv.FormatInt(l.Pids, 10))
}

// pidsCurrent is the number of tasks charged to the cgroup, zombies not
// yet reaped included.
func (j *v1Jail) pidsCurrent() (int64, error) {
	return j.files.readInt(j.pids, "pids.current")
}
