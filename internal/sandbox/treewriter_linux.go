package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
)

// treeWriter writes files below a root, each owned by uid:gid with the
// directories it creates. It keeps the directories of the last file's path
// open, one os.Root each, so every step is one component resolved in its
// parent: writing a file costs its own path's components, never a walk
// from the root per component (which made a deep upload cost quadratic
// time). Each Root confines what is done through it to its directory, so
// a link the payload planted leads nowhere outside.
type treeWriter struct {
	uid, gid int
	dirs     []*os.Root // dirs[0] is the root; dirs[i] is names[i-1] in dirs[i-1]
	names    []string
}

func newTreeWriter(root *os.Root, uid, gid int) *treeWriter {
	return &treeWriter{uid: uid, gid: gid, dirs: []*os.Root{root}}
}

// writeAll writes files in path order, so that files of one directory
// follow each other and its open handles serve them all.
func (w *treeWriter) writeAll(files []File) error {
	sorted := slices.SortedFunc(slices.Values(files), func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	for _, f := range sorted {
		if err := w.write(f); err != nil {
			return err
		}
	}
	return nil
}

// write writes one file, creating its missing directories.
func (w *treeWriter) write(f File) error {
	unsafePath, err := cleanInputPath(f.Path)
	if err != nil {
		return err
	}
	parts := strings.Split(unsafePath, "/")
	base, dirs := parts[len(parts)-1], parts[:len(parts)-1]
	keep := 0
	for keep < len(w.names) && keep < len(dirs) && w.names[keep] == dirs[keep] {
		keep++
	}
	w.closeFrom(keep)
	for _, name := range dirs[keep:] {
		if err := w.enter(name); err != nil {
			return fmt.Errorf("creating the directories of %s: %w", unsafePath, err)
		}
	}
	dir := w.dirs[len(w.dirs)-1]
	mode := fs.FileMode(f.Mode & 0o777)
	if mode == 0 {
		mode = 0o644
	}
	if err := dir.WriteFile(base, f.Data, mode); err != nil {
		return fmt.Errorf("writing %s: %w", unsafePath, err)
	}
	if err := dir.Lchown(base, w.uid, w.gid); err != nil {
		return fmt.Errorf("writing %s: %w", unsafePath, err)
	}
	return nil
}

// enter creates (or reuses) directory name in the innermost open
// directory, hands a new one to the payload's user, and opens it.
func (w *treeWriter) enter(name string) error {
	parent := w.dirs[len(w.dirs)-1]
	switch err := parent.Mkdir(name, 0o755); {
	case err == nil:
		if err := parent.Lchown(name, w.uid, w.gid); err != nil {
			return err
		}
	case !errors.Is(err, fs.ErrExist): // one that exists is the payload's or was made here
		return err
	}
	child, err := parent.OpenRoot(name)
	if err != nil {
		return err
	}
	w.dirs = append(w.dirs, child)
	w.names = append(w.names, name)
	return nil
}

// closeFrom closes the open directories below the first keep names.
func (w *treeWriter) closeFrom(keep int) {
	for len(w.names) > keep {
		last := len(w.dirs) - 1
		w.dirs[last].Close()
		w.dirs, w.names = w.dirs[:last], w.names[:len(w.names)-1]
	}
}

// close closes every directory it opened; the root stays the caller's.
func (w *treeWriter) close() { w.closeFrom(0) }
