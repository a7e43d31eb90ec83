package main

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// errFreeUnknown: this platform cannot tell free space (never on Linux).
var errFreeUnknown = errors.New("free space unknown")

// freeBytes is the space an unprivileged user may still fill below dir.
func freeBytes(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	return st.Bavail * uint64(st.Bsize), nil
}
