package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// freeBytes is the space an unprivileged user may still fill below dir.
func freeBytes(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	return st.Bavail * uint64(st.Bsize), nil
}
