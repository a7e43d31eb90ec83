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
// The package knows nothing about HTTP, executions or storage: it takes a
// Spec and returns a Result. It must never run a payload with less
// isolation than its Config asks for; a layer that cannot be applied fails
// the run with StatusSetupError.
package sandbox
