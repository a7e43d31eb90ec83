package workspace

import (
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// tempFile is a file being written into the cache, linked into place once
// whole. On Linux it is unnamed (O_TMPFILE): a blob that turns out to be
// cached already costs no directory entry to make and remove, which makes
// caching a small file about three times cheaper here.
type tempFile struct {
	*os.File
	path  string // a name that reaches it: /proc/self/fd/N, or its own
	named bool
}

func (c *cache) tempFile() (*tempFile, error) {
	fd, err := unix.Open(c.tmp, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) {
		f, err := os.CreateTemp(c.tmp, "blob-")
		if err != nil {
			return nil, err
		}
		return &tempFile{File: f, path: f.Name(), named: true}, nil
	}
	if err != nil {
		return nil, os.NewSyscallError("open O_TMPFILE", err)
	}
	return &tempFile{File: os.NewFile(uintptr(fd), c.tmp), path: "/proc/self/fd/" + strconv.Itoa(fd)}, nil
}

// link gives the file the name dst; os.ErrExist when dst is taken.
func (t *tempFile) link(dst string) error {
	if t.named {
		return os.Link(t.path, dst)
	}
	if err := unix.Linkat(unix.AT_FDCWD, t.path, unix.AT_FDCWD, dst, unix.AT_SYMLINK_FOLLOW); err != nil {
		return &os.LinkError{Op: "link", Old: t.path, New: dst, Err: err}
	}
	return nil
}

// discard closes the file; what was not linked is gone.
func (t *tempFile) discard() {
	t.Close()
	if t.named {
		os.Remove(t.path)
	}
}
