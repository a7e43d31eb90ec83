package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// The workspace of a running payload, seen from the host: a session lists,
// reads and writes its files while its interpreter lives.

// Workspace opens the running payload's workspace (/work) from the host as
// an os.Root, so that no path the payload planted (a symbolic link to
// /etc/passwd, "..") leads out of it. The caller closes it. An error
// wrapping os.ErrProcessDone: the jail has ended (or is ending).
func (p *Process) Workspace() (*os.Root, error) {
	select {
	case <-p.done:
		return nil, os.ErrProcessDone
	default:
	}
	dir := p.j.workHost
	if !p.j.m.cfg.Unsafe {
		dir = fmt.Sprintf("/proc/%d/root%s", p.j.initPid(), WorkDir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		if !p.j.m.cfg.Unsafe && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)) {
			// Its PID 1 is gone (or a zombie): the jail ended, and Wait
			// is about to say so.
			return nil, fmt.Errorf("opening the workspace: %w (%w)", os.ErrProcessDone, err)
		}
		return nil, fmt.Errorf("opening the workspace: %w", err)
	}
	if !p.j.m.cfg.Unsafe {
		// Its PID 1 not yet reaped after the open: the pid named it then,
		// not a process that took the pid over since.
		if err := p.j.stillAlive(); err != nil {
			root.Close()
			return nil, fmt.Errorf("opening the workspace: %w (%w)", os.ErrProcessDone, err)
		}
	}
	return root, nil
}

// WriteFiles writes files into the running payload's workspace, owned by
// the sandbox user; the workspace's size limit applies.
func (p *Process) WriteFiles(files []File) error {
	select {
	case <-p.done:
		return os.ErrProcessDone
	default:
	}
	if p.j.m.cfg.Unsafe {
		return fmt.Errorf("%w: writing files into a running payload's workspace needs isolation", ErrUnsupported)
	}
	if err := p.j.writeFilesVia(files); err != nil {
		return fmt.Errorf("writing files: %w", err)
	}
	return nil
}
