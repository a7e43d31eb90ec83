package sessions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// A session's workspace is read and written from the host while its
// interpreter lives, always through an os.Root of the jail's /work: no
// link the user's code planted leads out of it.

// PutFile writes a file into the session's workspace.
func (m *Service) PutFile(ctx context.Context, s *Live, unsafePath string, data []byte) error {
	s.files.RLock()
	defer s.files.RUnlock()
	k, err := m.awake(ctx, s)
	if err != nil {
		return err
	}
	p, err := cleanSessionPath(unsafePath)
	if err != nil {
		return err
	}
	if err := k.proc.WriteFiles([]sandbox.File{{Path: p, Data: data}}); err != nil {
		if errors.Is(err, sandbox.ErrInvalidSpec) {
			return fmt.Errorf("%w: %w", run.ErrInvalid, err)
		}
		return m.kernelErr(s, err)
	}
	return nil
}

// ListFiles lists the regular files of the session's workspace.
func (m *Service) ListFiles(ctx context.Context, s *Live) ([]File, error) {
	s.files.RLock()
	defer s.files.RUnlock()
	k, err := m.awake(ctx, s)
	if err != nil {
		return nil, err
	}
	root, err := m.workspaceOf(s, k)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	out := []File{}
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		out = append(out, File{Path: p, Size: info.Size(), Modified: info.ModTime().UTC()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("engine: listing session %s files: %w", s.id, err)
	}
	return out, nil
}

// ReadFile returns a regular file of the session's workspace.
// run.ErrFileNotFound: no such regular file (a link is not followed).
func (m *Service) ReadFile(ctx context.Context, s *Live, unsafePath string) ([]byte, error) {
	s.files.RLock()
	defer s.files.RUnlock()
	k, err := m.awake(ctx, s)
	if err != nil {
		return nil, err
	}
	p, err := cleanSessionPath(unsafePath)
	if err != nil {
		return nil, err
	}
	root, err := m.workspaceOf(s, k)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	data, err := readRegular(root, p, m.cfg.MaxFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", run.ErrFileNotFound, p)
	}
	return data, err
}

// readRegular reads p from root if it is a regular file of at most limit
// bytes.
func readRegular(root *os.Root, p string, limit int64) ([]byte, error) {
	info, err := root.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w", p, fs.ErrNotExist)
	}
	if info.Size() > limit {
		return nil, fmt.Errorf("%w: %s is %d bytes, over the limit of %d", run.ErrInvalid, p, info.Size(), limit)
	}
	f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit+1))
}

// workspaceOf opens the workspace of s's kernel k for its files routes.
func (m *Service) workspaceOf(s *Live, k *kernel) (*os.Root, error) {
	root, err := k.proc.Workspace()
	if err != nil {
		return nil, m.kernelErr(s, err)
	}
	return root, nil
}

// kernelErr is err from s's kernel as the caller reports it. A kernel
// that ended since it was found (os.ErrProcessDone, errKernelEnded) took
// its jail and files with it: the session ends, and the call says so
// (ErrEnded) rather than failing as the server's error.
func (m *Service) kernelErr(s *Live, err error) error {
	if errors.Is(err, os.ErrProcessDone) || errors.Is(err, errKernelEnded) {
		m.endSession(s, "its interpreter ended")
		return fmt.Errorf("%w: %s: its interpreter ended: %w", ErrEnded, s.id, err)
	}
	return fmt.Errorf("engine: session %s: %w", s.id, err)
}

// workspaceFiles reads every regular file of k's workspace, at most limit
// bytes in all (ErrWorkspaceTooLarge beyond), to carry them into a
// restarted or forked kernel.
func (m *Service) workspaceFiles(k *kernel, limit int64) ([]sandbox.File, error) {
	root, err := k.proc.Workspace()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	var files []sandbox.File
	var total int64
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if total+info.Size() > limit {
			return fmt.Errorf("%w: its files add up to more than the disk limit of %d bytes (a sparse file counts at its full size, a file with several names once per name); remove some, then try again",
				ErrWorkspaceTooLarge, limit)
		}
		data, err := readRegular(root, p, limit-total)
		if err != nil {
			return nil // changed under us: skipped
		}
		total += int64(len(data))
		files = append(files, sandbox.File{Path: p, Data: data, Mode: uint32(info.Mode().Perm())})
		return nil
	})
	return files, err
}

// liveKernel returns the session's running kernel.
func liveKernel(s *Live) (*kernel, error) {
	k := s.kernel()
	if k == nil || kernelEnded(k) {
		return nil, fmt.Errorf("%w: %s is restarting or ending", ErrBusy, s.id)
	}
	return k, nil
}

// cleanSessionPath checks a user's workspace-relative path.
func cleanSessionPath(unsafePath string) (string, error) {
	p := strings.TrimPrefix(unsafePath, "/work/")
	if err := sandbox.CheckPathLimits(p); err != nil {
		return "", fmt.Errorf("%w: workspace path %.64q...: %w", run.ErrInvalid, unsafePath, err)
	}
	if p == "" || path.IsAbs(p) || strings.ContainsRune(p, 0) || slices.Contains(strings.Split(p, "/"), "..") {
		return "", fmt.Errorf("%w: invalid workspace path %q", run.ErrInvalid, unsafePath)
	}
	if c := path.Clean(p); c != "." {
		return c, nil
	}
	return "", fmt.Errorf("%w: invalid workspace path %q", run.ErrInvalid, unsafePath)
}
