package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Reading a run's upper directory into a change set. What the run left is
// hostile: the directory is read through an os.Root (nothing resolves
// outside it), entries are judged by lstat before anything is opened, a
// file is opened without blocking (a FIFO cannot hang the scan) and must
// be the regular file lstat saw (os.Root follows a link inside the root
// even with O_NOFOLLOW, so the inode is compared), and sizes are held to
// the quota before a byte is read, so a sparse file of a terabyte costs
// nothing but a refusal.
//
// Overlayfs marks in the upper directory what the run did to the base:
//
//	character device 0:0       whiteout: the path was deleted
//	directory, *.overlay.opaque=y   the directory replaced the base's (rm -r, then mkdir)
//	file, directory, link      created or changed (a changed file is copied up whole)
//
// ("trusted." for an overlay mounted by root, "user." for one mounted in a
// user namespace with userxattr.)

type upperScan struct {
	ctx     context.Context
	root    *os.Root
	base    manifest
	changes map[string]*entry
	files   []candidate
	refused []Refused
	seen    map[string]bool
	salt    []byte // of the workspace's owner
}

// candidate is a regular file of the upper directory, not yet read.
type candidate struct {
	path      string
	size      int64
	mode      uint32
	mtime     int64
	dev, ino  uint64
	blocks512 int64
}

// scan reads the upper directory into a change set against base, with
// the quota room of rec's workspace as it stands.
func (m *Manager) scan(ctx context.Context, upper string, base manifest, rec wsRecord) (changeSet, error) {
	root, err := os.OpenRoot(upper)
	if err != nil {
		return changeSet{}, fmt.Errorf("opening the upper directory: %w", err)
	}
	defer root.Close()
	s := &upperScan{ctx: ctx, root: root, base: base, changes: map[string]*entry{}, seen: map[string]bool{}, salt: saltOf(rec.Owner)}
	if err := s.dir(""); err != nil {
		return changeSet{}, err
	}
	keyRoom, err := m.keyRoom(ctx, rec)
	if err != nil {
		return changeSet{}, err
	}
	if err := s.readFiles(m, min(rec.QuotaBytes, keyRoom)); err != nil {
		return changeSet{}, err
	}
	return changeSet{changes: s.changes, refused: s.refused}, nil
}

// dir scans the directory p ("" for the top) and what is under it.
func (s *upperScan) dir(p string) error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	f, err := s.root.Open(rootName(p))
	if err != nil {
		return fmt.Errorf("scanning %s: %w", quoted(p), err)
	}
	names, err := f.Readdirnames(-1)
	opaque := xattr(f, "overlay.opaque") == "y"
	f.Close()
	if err != nil {
		return fmt.Errorf("scanning %s: %w", quoted(p), err)
	}
	slices.Sort(names)
	for _, name := range names {
		q := join(p, name)
		if clean, err := cleanPath(q); err != nil || clean != q {
			s.refuse(q, fmt.Sprintf("not a name a workspace keeps: %v", err))
			continue
		}
		fi, err := s.root.Lstat(q)
		if err != nil {
			return fmt.Errorf("scanning %s: %w", quoted(q), err)
		}
		s.seen[q] = true
		if err := s.entry(q, fi); err != nil {
			return err
		}
	}
	if opaque {
		// The run's directory replaced the base's: what the base had
		// under it and the run did not make again is gone.
		for _, b := range s.base.under(p) {
			if !s.seen[b] {
				s.changes[b] = nil
			}
		}
	}
	return nil
}

func (s *upperScan) entry(q string, fi fs.FileInfo) error {
	st, _ := fi.Sys().(*syscall.Stat_t)
	mode, perm := fi.Mode(), uint32(fi.Mode().Perm())&0o755 // no group or world write, as uploads
	switch {
	case mode&fs.ModeCharDevice != 0 && st != nil && st.Rdev == 0:
		s.delete(q) // a whiteout
	case mode.IsDir():
		if b, ok := s.base[q]; !ok || b.Kind != kindDir || b.Mode != perm {
			s.put(entry{Path: q, Kind: kindDir, Mode: perm})
		}
		return s.dir(q)
	case mode&fs.ModeSymlink != 0:
		target, err := s.root.Readlink(q)
		if err != nil {
			return fmt.Errorf("scanning %s: %w", quoted(q), err)
		}
		if !linkInside(q, target) {
			s.refuse(q, fmt.Sprintf("a symbolic link pointing out of the workspace (to %s)", quoted(target)))
			s.delete(q)
			return nil
		}
		s.put(entry{Path: q, Kind: kindLink, Target: target})
	case mode.IsRegular() && st != nil:
		if fi.Size() == 0 && s.xattrWhiteout(q) {
			s.delete(q)
			return nil
		}
		s.files = append(s.files, candidate{path: q, size: fi.Size(), mode: perm, mtime: fi.ModTime().UnixNano(),
			dev: st.Dev, ino: st.Ino, blocks512: st.Blocks})
	default:
		s.refuse(q, "a "+kindName(mode)+": a workspace keeps files, directories and links inside it")
		s.delete(q)
	}
	return nil
}

func kindName(mode fs.FileMode) string {
	switch {
	case mode&fs.ModeNamedPipe != 0:
		return "named pipe"
	case mode&fs.ModeSocket != 0:
		return "socket"
	case mode&fs.ModeDevice != 0:
		return "device file"
	}
	return "special file"
}

// put records e, which replaces whatever the base had at its path (and
// under it, when that was a directory and e is not).
func (s *upperScan) put(e entry) {
	if b, ok := s.base[e.Path]; ok && b == e {
		return
	}
	if e.Kind != kindDir {
		for _, b := range s.base.under(e.Path) {
			s.changes[b] = nil
		}
	}
	s.changes[e.Path] = &e
}

// delete records that the run removed q (and all under it).
func (s *upperScan) delete(q string) {
	if _, ok := s.base[q]; ok {
		s.changes[q] = nil
	}
	for _, b := range s.base.under(q) {
		s.changes[b] = nil
	}
}

func (s *upperScan) refuse(q, why string) {
	s.refused = append(s.refused, Refused{Path: strings.ToValidUTF8(q, "\uFFFD"), Reason: why})
}

// readFiles reads the candidate files into the blob cache, in path order,
// as long as they fit room (the bytes the workspace may hold): a file
// that would take the version beyond it is refused unread.
func (s *upperScan) readFiles(m *Manager, room int64) error {
	used := s.base.usage().Bytes
	for p, e := range s.changes {
		if b, ok := s.base[p]; e == nil && ok && b.Kind == kindFile {
			used -= b.Size
		}
	}
	for _, c := range s.files {
		if err := s.ctx.Err(); err != nil {
			return err
		}
		var old int64
		if b, ok := s.base[c.path]; ok && b.Kind == kindFile {
			old = b.Size
		}
		if used+c.size-old > room {
			s.refuse(c.path, fmt.Sprintf("over the quota: %d bytes did not fit (%d bytes on disk)", c.size, c.blocks512*512))
			continue
		}
		e, err := s.read(m, c)
		if errors.Is(err, errChanged) {
			s.refuse(c.path, err.Error())
			continue
		}
		if err != nil {
			return err
		}
		used += c.size - old
		s.put(e)
	}
	return nil
}

var errChanged = errors.New("the file changed while it was read")

// read caches the candidate file's content; the file opened must be the
// regular file lstat saw, of the size it saw.
func (s *upperScan) read(m *Manager, c candidate) (entry, error) {
	f, err := s.root.OpenFile(c.path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return entry{}, fmt.Errorf("reading %s: %w", quoted(c.path), err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return entry{}, fmt.Errorf("reading %s: %w", quoted(c.path), err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.Mode().IsRegular() || st.Dev != c.dev || st.Ino != c.ino || fi.Size() != c.size {
		return entry{}, errChanged
	}
	a := attrs{Mode: c.mode, MTime: c.mtime}
	h, n, err := m.cache.ingest(f, c.size, a, s.salt)
	if errors.Is(err, errTooBig) || (err == nil && n != c.size) {
		return entry{}, errChanged
	}
	if err != nil {
		return entry{}, err
	}
	return entry{Path: c.path, Kind: kindFile, Hash: h, Size: c.size, Mode: c.mode, MTime: c.mtime}, nil
}

// xattrWhiteout reports a file that overlayfs made a whiteout by an
// extended attribute (where it cannot make a device node).
func (s *upperScan) xattrWhiteout(q string) bool {
	f, err := s.root.OpenFile(q, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	return hasXattr(f, "overlay.whiteout")
}

// xattr returns the value of overlayfs attribute name of f under the
// "trusted." prefix, "" when it has none. Only trusted.overlay.* is
// read: the workspace's overlay is mounted by root without userxattr, so
// only the kernel writes those, while a run may set user.overlay.* itself
// and the kernel passes it through as an ordinary attribute.
func xattr(f *os.File, name string) string {
	var val string
	rc, err := f.SyscallConn()
	if err != nil {
		return ""
	}
	_ = rc.Control(func(fd uintptr) {
		buf := make([]byte, 64)
		if n, err := unix.Fgetxattr(int(fd), "trusted."+name, buf); err == nil {
			val = string(buf[:n])
		}
	})
	return val
}

// hasXattr reports whether f has overlayfs attribute name under
// "trusted.", even empty (see xattr).
func hasXattr(f *os.File, name string) bool {
	found := false
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	_ = rc.Control(func(fd uintptr) {
		_, err := unix.Fgetxattr(int(fd), "trusted."+name, nil)
		found = err == nil
	})
	return found
}

// rootName is the name of p in an os.Root ("." for the top).
func rootName(p string) string {
	if p == "" {
		return "."
	}
	return p
}
