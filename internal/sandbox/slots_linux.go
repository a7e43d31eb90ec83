package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// Slots: how a persistent workspace reaches a jail that already exists.
//
// A cold or warm jail is built (its root, its mounts) before its payload's
// workspace is known, and its mount namespace is closed to the server (a
// multi-threaded process cannot enter it, and move_mount cannot attach into
// another namespace on the kernels pyexec supports). So every jail gets,
// when it is built, a slot: a directory of the host that the server owns,
// bound at /workspace as a slave of the host's mount. What the server later
// mounts on the slot in its own namespace propagates into the jail, and
// nothing the jail does propagates back:
//
//	host  <WorkspaceSlots>            a bind of itself: private, then shared (a peer group of its own)
//	      ├── <jail>/                 a cold or warm jail's slot: init binds it at /workspace (slave, ro)
//	      └── <template jail>/        a fork server's slot, its /workspace: always empty (no forked
//	                                  execution has a workspace), and every execution drops it
//
//	run   the server mounts the overlay (or the base tree read-only) on the slot: it appears at
//	      /workspace in the jail; when the run ends (every process of it dead) the server
//	      unmounts it and removes the slot with the jail.
//
// The workspace is mounted before the payload confines itself: Landlock
// grants writes below /workspace by a rule on the directory /workspace is
// when the ruleset is made, and it ignores a directory a later mount covers
// (a "hidden mount point"), so a workspace mounted after the payload's
// Landlock could only be read. Hence Spec.Workspace is given when the
// payload starts: a cold or warm jail's Start mounts it before init's exec.
// A warm payload started without one never gets one, and a fork refuses
// one: a fork server's /workspace would show every sibling's, so a run
// with a workspace takes a jail of its own.
//
// Without a mount on it the slot is an empty directory, read-only in the
// jail. A jail's init takes its slot with open_tree(OPEN_TREE_CLONE) before
// it makes its mounts private, so the copy stays a slave of the host's peer
// group (Linux 5.12+: mount_setattr sets its propagation). A forked
// execution's reaper makes its mounts slaves rather than private, which
// changes nothing for the fork server's private mounts.
//
// A read-only workspace is a clone of its tree made read-only, nosuid and
// nodev before it is attached: the flags of a bind made with mount(2) would
// change only after the mount (a remount), and remounts do not propagate.

// errNoSlots says why this server's jails have no slots.
func (m *Manager) errNoSlots() error {
	switch {
	case m.cfg.WorkspaceSlots == "":
		return fmt.Errorf("%w: workspaces are not enabled on this server", ErrUnsupported)
	case m.cfg.Unsafe:
		return fmt.Errorf("%w: workspaces need the jail (--unsafe-no-isolation has no mount namespace)", ErrUnsupported)
	case m.userns:
		return fmt.Errorf("%w: mounting a workspace into a jail needs a server running as root (an unprivileged server's jails live in user namespaces whose mounts the server cannot reach)", ErrUnsupported)
	}
	return nil
}

// Workspaces reports whether this server's jails can mount persistent
// workspaces (Spec.Workspace), and why not.
func (m *Manager) Workspaces() error {
	if m.slots == "" {
		if err := m.errNoSlots(); err != nil {
			return err
		}
		return fmt.Errorf("%w: workspace slots are not set up", ErrUnsupported)
	}
	return nil
}

// openSlots makes the slots directory a shared mount of its own: a bind
// of itself made private (so that nothing mounted below propagates to the
// host's other namespaces) and then shared (so that it propagates to the
// jails' slaves). What a crashed predecessor left mounted there is
// detached first.
func (m *Manager) openSlots() error {
	dir, err := filepath.Abs(m.cfg.WorkspaceSlots)
	if err != nil {
		return fmt.Errorf("workspace slots: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("workspace slots: %w", err)
	}
	if err := m.sweepSlots(dir); err != nil {
		return err
	}
	if err := removeEmptyDirs(dir, false); err != nil {
		return fmt.Errorf("workspace slots: %w", err)
	}
	steps := []struct {
		flags uintptr
		src   string
	}{{unix.MS_BIND, dir}, {unix.MS_PRIVATE, ""}, {unix.MS_SHARED, ""}}
	for i, s := range steps {
		if err := unix.Mount(s.src, dir, "", s.flags, ""); err != nil {
			if i > 0 {
				_ = unix.Unmount(dir, unix.MNT_DETACH)
			}
			return fmt.Errorf("workspace slots: %w", os.NewSyscallError("mount", err))
		}
	}
	m.slots = dir
	return nil
}

// sweepSlots detaches what a predecessor killed without its cleanup
// (SIGKILL, an OOM kill) left mounted on dir: its slots mount, with the
// workspaces still mounted on its jails' slots. Those mounts live in the
// host's mount namespace and outlive the process that made them (the
// runs' tmpfs below the workspace directory stay on purpose: Recover
// commits them). The detach is lazy, so a process of the dead server's
// that still runs keeps its view until it ends, and logged.
func (m *Manager) sweepSlots(dir string) error {
	detached := 0
	for ; isMountPoint(dir); detached++ {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("workspace slots: detaching a predecessor's: %w", os.NewSyscallError("umount", err))
		}
	}
	if detached > 0 {
		slots, _ := os.ReadDir(dir)
		m.log.Warn("detached the workspace slots a previous server left mounted (it ended without unmounting them)",
			"dir", dir, "mounts", detached, "slots", len(slots))
	}
	return nil
}

// closeSlots detaches the slots mount (with anything still mounted below).
func (m *Manager) closeSlots() error {
	if m.slots == "" {
		return nil
	}
	if err := unix.Unmount(m.slots, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("workspace slots: %w", os.NewSyscallError("umount", err))
	}
	return removeEmptyDirs(m.slots, true)
}

// removeEmptyDirs removes the directories below dir (and dir itself with
// self), deepest first, with os.Remove only: a directory that is not
// empty — something is mounted there, or a file was put there — stays and
// is an error, so nothing mounted on a slot is ever deleted through it.
func removeEmptyDirs(dir string, self bool) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if !e.IsDir() || isMountPoint(p) {
			return fmt.Errorf("%s is not an empty slot", p)
		}
		if err := removeEmptyDirs(p, true); err != nil {
			return err
		}
	}
	if self {
		return os.Remove(dir)
	}
	return nil
}

// isMountPoint reports whether dir is on another mount than its parent
// (a bind of a directory of the same file system included).
func isMountPoint(dir string) bool {
	var a, b unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, dir, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &a) != nil ||
		unix.Statx(unix.AT_FDCWD, filepath.Dir(dir), unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &b) != nil {
		return false
	}
	return a.Mode&syscall.S_IFMT == syscall.S_IFDIR && a.Mnt_id != b.Mnt_id
}

// makeSlot creates the jail's slot below parent (the slots directory).
func (j *Jail) makeSlot(parent string) error {
	if parent == "" {
		return nil
	}
	slot := filepath.Join(parent, j.id)
	if err := os.Mkdir(slot, 0o755); err != nil {
		return fmt.Errorf("making the jail's workspace slot: %w", err)
	}
	j.slot = slot
	return nil
}

// mountWorkspace mounts w on the jail's slot, from where it propagates to
// the jail's /workspace. The caller mounts before the payload confines
// itself: before init's exec, or before a fork is asked for.
func (j *Jail) mountWorkspace(w *WorkspaceMount) error {
	if err := w.validate(); err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case j.slot == "":
		return fmt.Errorf("mounting the workspace: %w", j.m.Workspaces())
	case j.wsMounted:
		return fmt.Errorf("%w: the jail has a workspace mounted already", ErrInvalidSpec)
	case j.closed:
		return fmt.Errorf("%w: the jail is closed", ErrJailUsed)
	}
	var err error
	if w.ReadOnly {
		err = attachReadOnly(w.Lower, j.slot)
	} else if err = unix.Mount("overlay", j.slot, "overlay", unix.MS_NOSUID|unix.MS_NODEV, w.OverlayOptions()); err != nil {
		err = os.NewSyscallError("mount overlay", err)
	}
	if err != nil {
		return fmt.Errorf("mounting the workspace: %w", err)
	}
	j.wsMounted = true
	return nil
}

// attachReadOnly mounts a clone of dir on target, read-only, nosuid and
// nodev from the moment it is attached (so its propagated copies are too).
func attachReadOnly(dir, target string) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return os.NewSyscallError("open_tree", err)
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return os.NewSyscallError("mount_setattr", err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return os.NewSyscallError("move_mount", err)
	}
	return nil
}

// unmountWorkspace unmounts the jail's workspace, if it has one, once
// every process of the jail is gone: the unmount propagates to every copy,
// and whoever committed the workspace reads its upper directory unmounted.
func (j *Jail) unmountWorkspace() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.wsMounted {
		return nil
	}
	j.wsMounted = false
	if err := unix.Unmount(j.slot, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmounting the workspace: %w", os.NewSyscallError("umount", err))
	}
	return nil
}

// removeSlot removes the jail's slot once nothing is mounted on it.
func (j *Jail) removeSlot() error {
	if j.slot == "" {
		return nil
	}
	err := j.unmountWorkspace()
	if rerr := os.Remove(j.slot); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}

// openSlot is init's side: a detached clone of the jail's slot, made a
// slave of the host's peer group and read-only, nosuid and nodev, taken
// before init makes its mounts private (which would cut the clone from
// the group). attachSlot puts it at /workspace in the new root.
func openSlot(slot string) (int, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, slot, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return -1, os.NewSyscallError("open_tree", err)
	}
	attr := unix.MountAttr{Propagation: unix.MS_SLAVE}
	err = unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr)
	if err == nil {
		attr = unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
		err = unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr)
	}
	if err != nil {
		unix.Close(fd)
		return -1, os.NewSyscallError("mount_setattr", err)
	}
	return fd, nil
}

func attachSlot(fd int, root string) error {
	dst := filepath.Join(root, WorkspaceMountDir)
	if err := os.Mkdir(dst, 0o755); err != nil {
		return err
	}
	return os.NewSyscallError("move_mount", unix.MoveMount(fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH))
}
