package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// mountTmpfs mounts a tmpfs of size bytes (at least a page: a size of
// zero would mean no limit) and inodes inodes on dir, private to root,
// without devices or set-user-ID programs. It is mounted in the server's
// mount namespace, so it outlives the jail that stacks an overlay on it
// and Commit can read it afterwards.
func mountTmpfs(dir string, size int64, inodes int) error {
	size = max(size, int64(os.Getpagesize()))
	data := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700", size, inodes)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		if errors.Is(err, unix.EPERM) {
			return fmt.Errorf("%w: mounting the tmpfs of a writable workspace needs CAP_SYS_ADMIN: %w", ErrUnsupported, err)
		}
		return fmt.Errorf("mounting the tmpfs of a workspace mount on %s: %w", dir, os.NewSyscallError("mount", err))
	}
	return nil
}

// unmountTmpfs unmounts dir if something is mounted there. A mount still
// busy (a process that outlived its jail would be a bug elsewhere) is
// detached rather than left.
func unmountTmpfs(dir string) error {
	if !isMountPoint(dir) {
		return nil
	}
	err := unix.Unmount(dir, 0)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(dir, unix.MNT_DETACH)
	}
	if err != nil {
		return fmt.Errorf("unmounting %s: %w", dir, os.NewSyscallError("umount", err))
	}
	return nil
}

// isMountPoint reports whether dir is on another file system than its
// parent.
func isMountPoint(dir string) bool {
	var a, b unix.Stat_t
	if unix.Lstat(dir, &a) != nil || unix.Lstat(filepath.Dir(dir), &b) != nil {
		return false
	}
	return a.Mode&syscall.S_IFMT == syscall.S_IFDIR && a.Dev != b.Dev
}

// syncStore makes the blobs and manifests written so far durable before
// a head names them, when this node's disk is the store of record: one
// syncfs for the whole commit, where an fsync per file of a large upload
// would cost a disk flush each.
func (c *cache) syncStore() error {
	if c.remote != nil {
		return nil // the store of record is JetStream; the cache may lose what it likes
	}
	f, err := os.Open(c.blobs)
	if err != nil {
		return fmt.Errorf("syncing the blob store: %w", err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("syncing the blob store: %w", os.NewSyscallError("syncfs", err))
	}
	return nil
}
