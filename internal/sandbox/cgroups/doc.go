// Package cgroups gives each jail its own cgroup below the server's cgroup
// parent and bounds it: memory without swap, the number of tasks, and CPU
// bandwidth. It owns the jails' part of the cgroup tree, on cgroup v1
// (v1_linux.go: a directory in each of the memory, pids, cpu and cpuacct
// hierarchies) and on cgroup v2 (v2_linux.go; v2_setup_linux.go moves the
// server into its leaf and delegates the controllers down to the jails'
// parent), one file per concern of each version, as libcontainer keeps
// cgroups/fs and cgroups/fs2 beside each other. Beside them: the control
// files a jail's cgroup keeps open (ctlfiles_linux.go), the emptied
// cgroups kept for the next jails (spares_linux.go) and the Manager that
// hands cgroups out and takes them back (manager_linux.go).
//
// It reads what a cgroup counted (CPU time, peak memory, OOM kills) and
// kills the tasks of a jail's cgroup when it removes it; it starts no
// process and knows nothing of jails' namespaces, payloads or executions.
// It must never touch a cgroup outside the jails' parent, never remove or
// sweep a cgroup whose name lacks the prefix it is given, and never hand a
// cgroup to a jail while a task of an earlier jail is in it, memory is
// still charged to it or its peak could not be reset: a cgroup that cannot
// be proven vacant is removed, never reused.
package cgroups
