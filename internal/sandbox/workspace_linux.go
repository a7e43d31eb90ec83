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
	open := p.j.openWork
	if p.j.m.cfg.Unsafe {
		open = func() (*os.Root, error) { return os.OpenRoot(p.j.workHost) }
	}
	root, err := open()
	if err != nil {
		return nil, fmt.Errorf("opening the workspace: %w", err)
	}
	return root, nil
}

// openWork opens the jail's workspace (/work) from the host through
// /proc/<init>/root. An error wrapping os.ErrProcessDone: the jail's PID
// 1 is gone (or a zombie), or was reaped by the end of the open, when its
// pid may have named another process, another jail's perhaps; so the
// root returned is this jail's.
func (j *Jail) openWork() (*os.Root, error) {
	root, err := os.OpenRoot(fmt.Sprintf("/proc/%d/root%s", j.initPid(), WorkDir))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) || j.stillAlive() != nil {
			return nil, fmt.Errorf("%w (%w)", os.ErrProcessDone, err)
		}
		return nil, err
	}
	if err := j.stillAlive(); err != nil {
		root.Close()
		return nil, fmt.Errorf("%w (%w)", os.ErrProcessDone, err)
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
