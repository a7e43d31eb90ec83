package sandbox

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// collectFiles runs in init after the payload exited: it kills every
// process the payload left, so that nothing changes the workspace while it
// is read, then sends the files x.Collect asks for and the end marker.
func collectFiles(w *wire, s *setupMsg, x *execMsg, pid int) error {
	stopLeftovers(s.Unsafe, pid)
	workDir := WorkDir
	if s.Unsafe {
		workDir = s.RootDir
	}
	c := x.Collect.withDefaults()
	inputs := make(map[string][]byte, len(x.Files))
	for _, f := range x.Files {
		if p, err := cleanRelPath(f.Path); err == nil {
			inputs[p] = f.Data
		}
	}
	root, err := os.OpenRoot(workDir)
	if err != nil {
		return step("collect files", err)
	}
	defer root.Close()
	omitted, err := walkWorkspace(root, c, inputs, func(f fileMsg) error {
		return w.send(message{Kind: kindFile, File: &f})
	})
	if err != nil {
		return step("collect files", err)
	}
	return w.send(message{Kind: kindCollected, Collected: &collectedMsg{Omitted: omitted}})
}

// collectVia collects a forked execution's workspace from the parent,
// through its reaper's root, once the reaper has killed every process the
// payload left; then it lets the reaper exit. The walk is the one init
// does: regular files only, never a link, within c's caps.
func (j *Jail) collectVia(c Collect) ([]CollectedFile, int, error) {
	defer j.ctrlW.Close() // the reaper waits for this EOF
	root, err := os.OpenRoot(fmt.Sprintf("/proc/%d/root%s", j.initPid(), WorkDir))
	if err != nil {
		return nil, 0, err
	}
	defer root.Close()
	if err := j.stillAlive(); err != nil {
		return nil, 0, err
	}
	var files []CollectedFile
	omitted, err := walkWorkspace(root, c, nil, func(f fileMsg) error {
		files = append(files, CollectedFile{Path: f.Path, Data: f.Data, Mode: f.Mode})
		return nil
	})
	return files, omitted, err
}

// walkWorkspace hands emit every regular file of root that c asks for,
// leaving out inputs the run did not change, and returns how many files
// the caps left out.
func walkWorkspace(root *os.Root, c Collect, inputs map[string][]byte, emit func(fileMsg) error) (int, error) {
	var count, omitted int
	var total int64
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		// Only regular files: WalkDir reports a symbolic link as such and
		// never descends into one; devices, fifos and sockets are skipped.
		if err != nil || !d.Type().IsRegular() || !wanted(p, c.Globs) {
			return nil
		}
		info, err := root.Lstat(p)
		if err != nil || !info.Mode().IsRegular() {
			return nil
		}
		in, isInput := inputs[p]
		if len(c.Globs) == 0 && isInput && int64(len(in)) == info.Size() {
			if data, err := readRegular(root, p, info.Size()); err == nil && bytes.Equal(data, in) {
				return nil // an input file the run left as it was
			}
		}
		if count >= c.MaxFiles || total+info.Size() > c.MaxBytes {
			omitted++
			return nil
		}
		data, err := readRegular(root, p, info.Size())
		if err != nil {
			return nil
		}
		count++
		total += int64(len(data))
		return emit(fileMsg{Path: p, Mode: uint32(info.Mode().Perm()), Data: data})
	})
	return omitted, err
}

func wanted(p string, globs []string) bool {
	if len(globs) == 0 {
		return true
	}
	for _, g := range globs {
		if matchGlob(g, p) {
			return true
		}
	}
	return false
}

// readRegular reads a file that Lstat said is regular and size bytes
// long, refusing anything else at open time (O_NOFOLLOW, fstat).
func readRegular(root *os.Root, p string, size int64) ([]byte, error) {
	f, err := root.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	data, err := io.ReadAll(io.LimitReader(f, size+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != size {
		return nil, fmt.Errorf("%s changed while it was read", p)
	}
	return data, nil
}

// stopLeftovers kills every process of the jail but init (kill(-1) from
// PID 1 of a pid namespace reaches exactly those) and reaps them. Without
// isolation there is no such namespace: only the payload's session is
// killed, never kill(-1) on the host.
func stopLeftovers(unsafe bool, pid int) {
	if unsafe {
		_ = unix.Kill(-pid, unix.SIGKILL)
		return
	}
	_ = unix.Kill(-1, unix.SIGKILL)
	for {
		_, err := unix.Wait4(-1, nil, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return // ECHILD: all reaped
		}
	}
}
