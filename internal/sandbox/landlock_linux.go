package sandbox

import (
	"errors"
	"fmt"
	"os"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Landlock is a second wall around the filesystem: even if a mount were writable by mistake, the payload may only
// write below /work, /tmp and /dev/shm. Network access is not handled:
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

// applyLandlock restricts the calling thread; the targets of writable
// mounts are writable like /work. It returns the ABI used, or 0 when the
// kernel has no Landlock.
func applyLandlock(mounts []Mount) (int, error) {
	abi := landlockABI()
	if abi == 0 {
		return 0, nil
	}
	handled := fsRights(abi)
	attr := ll.RulesetAttr{HandledAccessFS: handled}
	if abi >= 6 {
		// Abstract unix sockets and signals only within the jail's domain.
		attr.Scoped = ll.ScopeAbstractUnixSocket | ll.ScopeSignal
	}
	fd, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return abi, os.NewSyscallError("landlock_create_ruleset", err)
	}
	defer unix.Close(fd)

	read := uint64(ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir)
	// Opening for writing with O_TRUNC (Python's open(..., "w")) needs the
	// truncate right on top of write (ABI 3 and later).
	write := uint64(ll.AccessFSWriteFile | ll.AccessFSTruncate)
	devRights := read | write
	if abi >= 5 {
		devRights |= ll.AccessFSIoctlDev
	}
	rules := []struct {
		path   string
		rights uint64
	}{
		{"/", read},
		{WorkDir, handled},
		{"/tmp", handled},
		{"/dev/shm", handled},
		{"/dev", devRights & handled},
		{"/proc", (read | write) & handled},
	}
	for _, m := range mounts {
		if m.Writable {
			rules = append(rules, struct {
				path   string
				rights uint64
			}{m.target(), handled})
		}
	}
	for _, r := range rules {
		if err := addPathRule(fd, r.path, r.rights); err != nil {
			return abi, err
		}
	}
	if err := ll.LandlockRestrictSelf(fd, 0); err != nil {
		return abi, os.NewSyscallError("landlock_restrict_self", err)
	}
	return abi, nil
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
