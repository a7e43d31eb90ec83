package testserver

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A server killed with SIGKILL leaves what it mounted in the host's mount
// namespace: its workspace slots (DATA_DIR/workspace-slots) and its runs'
// tmpfs (DATA_DIR/workspaces/runs). Its next start sweeps them; a test
// that does not start it again detaches them before it removes the data
// directory, which would fail on a mount point.

// MountsBelow lists the mount points at or below dir in this process's
// mount namespace, deepest first.
func MountsBelow(dir string) ([]string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(info))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		p := unescapeMountinfo(f[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	// Deepest first; a path mounted twice is listed twice.
	slices.SortStableFunc(out, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return out, sc.Err()
}

// UnmountBelow detaches every mount at or below dir, deepest first, and
// returns the mount points it detached.
func UnmountBelow(dir string) ([]string, error) {
	mounts, err := MountsBelow(dir)
	if err != nil {
		return nil, err
	}
	var done []string
	for _, m := range mounts {
		err := unix.Unmount(m, unix.MNT_DETACH)
		if err == unix.EINVAL {
			continue // went with the detach of a mount above it
		}
		if err != nil {
			return done, &os.PathError{Op: "umount", Path: m, Err: err}
		}
		done = append(done, m)
	}
	return done, nil
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space,
// \011, \012, \134).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
