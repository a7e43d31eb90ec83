package sandbox

import (
	"errors"
	"fmt"
	"os"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Landlock is a second wall around the filesystem: even if a mount were writable by mistake, the payload may only
// write below /work, /workspace, /tmp and /dev/shm. Network access is not handled:
// without network the jail's own network namespace is the wall, and its
// loopback must stay usable. It is best effort: a kernel
// without Landlock is reported by doctor, not an error.
//
// go-landlock's high-level API restricts every thread through
// AllThreadsSyscall, which Go refuses in cgo binaries (and the race
// detector needs cgo); the payload is forked from init's locked main
// thread, so restricting that one thread is exactly enough.

// landlockABI returns the kernel's Landlock ABI version, 0 if absent.
func landlockABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// fsRights returns the filesystem rights that ABI version abi can handle.
func fsRights(abi int) uint64 {
	r := uint64(ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSReadDir |
		ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeChar | ll.AccessFSMakeDir |
		ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo | ll.AccessFSMakeBlock | ll.AccessFSMakeSym)
	if abi >= 2 {
		r |= ll.AccessFSRefer
	}
	if abi >= 3 {
		r |= ll.AccessFSTruncate
	}
	if abi >= 5 {
		r |= ll.AccessFSIoctlDev
	}
	return r
}

// landlockPlan is a Landlock ruleset: the rights handled, the scopes and
// one rule per path. A fork server's executions apply the same plan to
// themselves (see Template), so it is plain data.
type landlockPlan struct {
	ABI     int            `json:"abi"` // 0: the kernel has no Landlock
	Handled uint64         `json:"handled_fs"`
	Scoped  uint64         `json:"scoped"`
	Rules   []landlockRule `json:"rules"`
}

type landlockRule struct {
	Path   string `json:"path"`
	Rights uint64 `json:"rights"`
}

// planLandlock is the ruleset of a payload with mounts: read everywhere,
// write only below /work, /tmp, /dev/shm and writable mounts.
func planLandlock(mounts []Mount) landlockPlan {
	abi := landlockABI()
	if abi == 0 {
		return landlockPlan{}
	}
	handled := fsRights(abi)
	plan := landlockPlan{ABI: abi, Handled: handled}
	if abi >= 6 {
		// Abstract unix sockets and signals only within the jail's domain.
		plan.Scoped = ll.ScopeAbstractUnixSocket | ll.ScopeSignal
	}
	read := uint64(ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir)
	// Opening for writing with O_TRUNC (Python's open(..., "w")) needs the
	// truncate right on top of write (ABI 3 and later).
	write := uint64(ll.AccessFSWriteFile | ll.AccessFSTruncate)
	devRights := read | write
	if abi >= 5 {
		devRights |= ll.AccessFSIoctlDev
	}
	plan.Rules = []landlockRule{
		{"/", read},
		{WorkDir, handled},
		// A persistent workspace, where the jail has a slot: what is
		// mounted there later is below this rule (Landlock follows a path
		// up through its mount points), and a read-only one stays
		// read-only by its mount.
		{WorkspaceMountDir, handled},
		{"/tmp", handled},
		{"/dev/shm", handled},
		{"/dev", devRights & handled},
		{"/proc", (read | write) & handled},
	}
	for _, m := range mounts {
		if m.Writable {
			plan.Rules = append(plan.Rules, landlockRule{m.target(), handled})
		}
	}
	return plan
}

// applyLandlock restricts the calling thread; the targets of writable
// mounts are writable like /work. It returns the ABI used, or 0 when the
// kernel has no Landlock.
func applyLandlock(mounts []Mount) (int, error) {
	plan := planLandlock(mounts)
	if plan.ABI == 0 {
		return 0, nil
	}
	attr := ll.RulesetAttr{HandledAccessFS: plan.Handled, Scoped: plan.Scoped}
	fd, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return plan.ABI, os.NewSyscallError("landlock_create_ruleset", err)
	}
	defer unix.Close(fd)
	for _, r := range plan.Rules {
		if err := addPathRule(fd, r.Path, r.Rights); err != nil {
			return plan.ABI, err
		}
	}
	if err := ll.LandlockRestrictSelf(fd, 0); err != nil {
		return plan.ABI, os.NewSyscallError("landlock_restrict_self", err)
	}
	return plan.ABI, nil
}

func addPathRule(rulesetFD int, path string, rights uint64) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	attr := ll.PathBeneathAttr{AllowedAccess: rights, ParentFd: fd}
	if err := ll.LandlockAddPathBeneathRule(rulesetFD, &attr, 0); err != nil {
		return fmt.Errorf("landlock rule for %s: %w", path, err)
	}
	return nil
}
