// Package sandbox runs one program in a fresh Linux jail with enforced limits.
//
// The parent side (spawn_linux.go) re-executes the pyexec binary as
// "pyexec sandbox-init" inside new mount, pid, net, ipc, uts and cgroup
// namespaces, places it in its own cgroup, and talks to it over inherited
// pipes (see sync.go for the protocol). The child side (init_linux.go)
// builds a minimal read-only root, pivots into it, stays as PID 1 of the
// jail, and starts the payload as an unprivileged user with no
// capabilities, no_new_privs, rlimits, Landlock and a seccomp filter.
//
// A Template (forkserver_linux.go) is a fork server in such a jail: each
// execution forked from it builds the same isolation for itself (its own
// namespaces, tmpfs, /proc, cgroup, uid, Landlock and seccomp) before any
// user code, and is then handed its work like a prepared jail's payload.
//
// Two concerns live in packages of their own: each jail's cgroup, on
// cgroup v1 and v2, with the spares kept for reuse (sandbox/cgroups), and
// what the server does in a jail's network namespace from outside it, its
// egress link and listeners (sandbox/netns).
//
// The rest is kept as one package because the parent and the child side
// of a jail are two halves of one unexported protocol (the messages and
// descriptor numbers of sync.go, the relay, the fork server's requests)
// and of one Jail whose pipes, cgroup and PID 1 a Process and a Template
// share under its lock: split by side, that protocol and the jail's state
// would have to be exported to the whole module, and the life of one
// execution would no longer read in one package.
//
// The package knows nothing about HTTP, executions or storage: it takes a
// Spec and returns a Result. It must never run a payload with less
// isolation than its Config asks for; a layer that cannot be applied fails
// the run with StatusSetupError.
package sandbox
