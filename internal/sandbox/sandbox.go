package sandbox

import (
	"context"
	"log/slog"
)

// InitArg is the hidden subcommand under which the pyexec binary (or a test
// binary, see IsInit) runs as PID 1 of a jail.
const InitArg = "sandbox-init"

// Layers names isolation layers that an operator may switch off
// explicitly. Every layer not switched off is required: if it cannot be
// applied, the run fails with StatusSetupError.
type Layers struct {
	NoSeccomp  bool // skip the seccomp filter
	NoLandlock bool // skip Landlock even where the kernel has it
	NoCgroups  bool // no cgroup: memory, pids and CPU are bounded by rlimits only
}

// Config is the operator's configuration of the jail; validated by New.
type Config struct {
	// InitPath is the binary re-executed as the jail's init; empty means
	// /proc/self/exe (the running pyexec or test binary).
	InitPath string
	// CgroupParent names the cgroup under which every jail gets its own
	// child, e.g. "pyexec" (the default) → /sys/fs/cgroup/.../pyexec/<id>.
	CgroupParent string
	// Instance names this server's jails (their cgroups are called
	// "<Instance>-<random>"), so that Sweep removes only what an earlier
	// run of the same server left, never the jails of another server
	// sharing the cgroup parent. Empty: Sweep removes every jail under the
	// parent.
	Instance string
	// SpareCgroups is how many cgroups of finished jails are kept, emptied,
	// for the next jails instead of being removed and made again; 0 keeps
	// none. Manager.Close removes them; a crashed server's are swept by
	// the next one (Sweep), as they keep their jail names.
	SpareCgroups int
	// UID and GID run the payload; zero means 65534 (nobody/nogroup).
	UID, GID int
	// Disable lists layers the operator explicitly switched off.
	Disable Layers
	// Unsafe runs payloads with rlimits only: no namespaces, no new root,
	// no cgroup, no seccomp. Only for hosts that cannot isolate at all;
	// `pyexec serve` requires --unsafe-no-isolation for it.
	Unsafe bool
	// WorkspaceSlots is a host directory under which every jail gets a
	// slot for a persistent workspace (see slots_linux.go): a root
	// server's jails can then mount one (Spec.Workspace). Empty, unsafe
	// or unprivileged: no jail can, and Manager.Workspaces says why.
	WorkspaceSlots string
	// Logger receives setup diagnostics; nil discards them.
	Logger *slog.Logger
}

// Base is what a jail needs before a payload is known: its mounts and its
// network mode. A prepared jail (see Manager.Prepare) is built from a Base
// and later given the rest of a Spec; Spec.Mounts and Spec.Network must then
// match the Base.
type Base struct {
	Mounts  []Mount
	Network bool
}

// Runner runs payloads in jails. *Manager implements it; consumers (the
// engine, the pool) define their own narrow interfaces around it.
type Runner interface {
	Run(ctx context.Context, spec Spec, out OutputFunc) (Result, error)
}
