package snapshot

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// A session's workspace travels in its snapshot as a tar of its regular
// files and directories, read through an os.Root of the old jail's /work
// and written back through the new jail's own file writing (the caller's
// sandbox.Process.WriteFiles, which applies its owner and size limit).

// ErrWorkspace: a workspace that cannot go into a snapshot, or a tar that
// cannot come out of one.
var ErrWorkspace = errors.New("snapshot workspace")

// File is one regular file of a restored workspace.
type File struct {
	Path string // relative, slash-separated, never ".." nor absolute
	Data []byte
	Mode uint32 // permission bits
}

// Tar writes the regular files under root (and its directories) to w as a
// tar, at most maxBytes of file data. Links, devices, pipes and sockets
// are left out; no link is followed, and a file the user's code swaps for
// something else while it is read is refused rather than waited on. A
// path a restore could not write back (sandbox.CheckPathLimits: too
// long, too deep, a name too long) is refused here, at the save, so that
// nothing is saved that cannot be restored.
func Tar(w io.Writer, root *os.Root, maxBytes int64) error {
	tw := tar.NewWriter(w)
	var total int64
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		if err := sandbox.CheckPathLimits(p); err != nil {
			return fmt.Errorf("%w: %.64q... could not be restored: %w", ErrWorkspace, p, err)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: int64(info.Mode().Perm()),
				ModTime: info.ModTime()})
		case !d.Type().IsRegular():
			return nil
		}
		f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%w: %s changed while it was saved", ErrWorkspace, p)
		}
		if total += st.Size(); total > maxBytes {
			return fmt.Errorf("%w: more than %d bytes of files", ErrWorkspace, maxBytes)
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: p, Size: st.Size(), Mode: int64(st.Mode().Perm()), ModTime: st.ModTime()}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.CopyN(tw, f, st.Size()); err != nil {
			return fmt.Errorf("%w: %s changed while it was saved: %w", ErrWorkspace, p, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("saving the workspace: %w", err)
	}
	return tw.Close()
}

// UntarLimits bound what Untar accepts.
type UntarLimits struct {
	MaxFiles int   // regular files
	MaxBytes int64 // their data together
}

// Untar reads a workspace tar (as Tar writes it) into memory. Anything but
// regular files and directories, an absolute path or a ".." component, and
// more than the limits are refused before anything is returned.
func Untar(r io.Reader, lim UntarLimits) ([]File, error) {
	tr := tar.NewReader(r)
	var files []File
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrWorkspace, err)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			continue // made for the files in it
		case tar.TypeReg:
		default:
			return nil, fmt.Errorf("%w: %q is not a regular file", ErrWorkspace, hdr.Name)
		}
		name := path.Clean(hdr.Name)
		if !fs.ValidPath(name) || name == "." || strings.ContainsRune(name, 0) {
			return nil, fmt.Errorf("%w: path %q", ErrWorkspace, hdr.Name)
		}
		if len(files) >= lim.MaxFiles || hdr.Size > lim.MaxBytes-total {
			return nil, fmt.Errorf("%w: more than %d files or %d bytes", ErrWorkspace, lim.MaxFiles, lim.MaxBytes)
		}
		data := make([]byte, hdr.Size)
		if _, err := io.ReadFull(tr, data); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrWorkspace, name, err)
		}
		total += hdr.Size
		files = append(files, File{Path: name, Data: data, Mode: uint32(hdr.Mode) & 0o777})
	}
}
