package workspace

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/google/uuid"
)

// Warm trees after a commit. Building a version's tree costs a hard link
// per file (≈ 0.3 s for 10,000), so the first mount of each new version
// would pay it. Instead, when a commit moves the head from the version a
// writer started from (its base) to the next, the node that committed
// turns the base's tree into the new version's, touching only the paths
// that differ: the base's tree is moved out of trees/ under a temporary
// name, patched (removed paths, new links to the cache, new modes) and
// moved in under the new root. It costs what the commit changed, not what
// the workspace holds.
//
// A tree in place is still never changed: the base's tree is taken only
// when no mount but the committing writer's own uses it (m.inUse, checked
// and the tree moved out under m.mu, so a Prepare either counted its use
// first and the tree stays, or comes after and builds the base again),
// and the committing writer's run is over (its jail and overlay are gone
// before Commit). The base is no longer the head, so the collector would
// have removed its tree anyway; when it is still the head of another
// workspace with equal files, that workspace's next mount builds it again.
// The patched tree links only blobs and variants of the cache — never a
// file of a run's upper directory — and appears under its root only
// whole: a patch that fails is removed, and the next mount builds the
// tree as before.

// advanceTree derives the tree of manifest root to from the tree of
// manifest root from, a version of owner's, if this node has the one, not
// yet the other, and the caller's held mounts are the only users of from
// (1 for a run's mount, 0 for an API write). It runs under m.writing; a
// failure costs only the warm tree, and is logged.
func (m *Manager) advanceTree(ctx context.Context, owner, from, to string, held int) {
	if from == to {
		return
	}
	unlock := m.treeLocks.lock(to)
	defer unlock()
	dst := filepath.Join(m.dirs.trees, to)
	if _, err := os.Lstat(dst); err == nil {
		return // there already (a restore of a version this node has)
	}
	tmp, err := m.takeTree(from, held)
	if tmp == "" || err != nil {
		if err != nil {
			m.log.Warn("deriving a workspace tree", "from", from, "to", to, "err", err)
		}
		return
	}
	err = m.patchTree(ctx, tmp, owner, from, to)
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		m.log.Warn("deriving a workspace tree", "from", from, "to", to, "err", err)
		if rerr := removeTree(tmp); rerr != nil {
			m.log.Warn("removing a tree left half derived", "dir", tmp, "err", rerr)
		}
		return
	}
	m.treesDerived.Add(1)
}

// takeTree moves the tree of root out of trees/ and returns where it went,
// or "" when this node has none or a mount other than the caller's held
// ones uses it.
func (m *Manager) takeTree(root string, held int) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	src := filepath.Join(m.dirs.trees, root)
	if m.inUse[root] != held {
		return "", nil
	}
	if _, err := os.Lstat(src); err != nil {
		return "", nil
	}
	// ".build-" like a tree being built: the collector leaves it alone,
	// and a server that stops halfway removes it when it starts again.
	tmp := filepath.Join(m.dirs.trees, ".build-"+uuid.NewString())
	if err := os.Rename(src, tmp); err != nil {
		return "", fmt.Errorf("taking tree %s: %w", root, err)
	}
	return tmp, nil
}

// patchTree turns dir, the tree of manifest from, into the tree of
// manifest to: what cold building to would make (build), but for the
// times of directories.
func (m *Manager) patchTree(ctx context.Context, dir, owner, from, to string) error {
	old, err := m.manifest(ctx, from)
	if err != nil {
		return err
	}
	man, err := m.manifest(ctx, to)
	if err != nil {
		return err
	}
	d := diffTrees(old, man)
	if err := m.fetchAll(ctx, d.add, owner); err != nil {
		return err
	}
	at := func(p string) string { return filepath.Join(dir, filepath.FromSlash(p)) }
	// Directories the patch changes are made writable by their owner
	// first (as build makes them) and given their modes last.
	for _, p := range d.open {
		if err := os.Chmod(at(p), 0o700); err != nil {
			return err
		}
	}
	for _, p := range slices.Backward(d.remove) { // deepest first
		if err := os.Remove(at(p)); err != nil {
			return err
		}
	}
	for _, p := range d.add.paths() { // parents first
		if err := m.makeEntry(d.add[p], at(p)); err != nil {
			return err
		}
	}
	for _, p := range slices.Backward(d.modes) {
		if p == "" {
			continue
		}
		if err := m.ownDir(at(p), man[p].Mode); err != nil {
			return err
		}
	}
	return m.ownDir(dir, 0o755)
}

// treeDiff is what changes between the trees of two manifests.
type treeDiff struct {
	remove []string // paths of the old tree to remove, sorted
	add    manifest // entries to make
	open   []string // directories of the old tree to make writable first, sorted ("" the top)
	modes  []string // directories of the new tree to give their modes last, sorted ("" the top)
}

// diffTrees compares two manifests as trees: a file that differs only in
// its modification time is the same link in both (linkSource ignores the
// time), and a directory whose mode changed stays.
func diffTrees(old, man manifest) treeDiff {
	d := treeDiff{add: manifest{}}
	open, modes := map[string]bool{"": true}, map[string]bool{"": true}
	// Every directory of the old tree above a changed path is opened, so
	// that it can be searched and changed whatever its mode; the ones
	// that stay get their modes back.
	changed := func(p string) {
		parentDirs(p, func(a string) {
			if e, ok := old[a]; ok && e.Kind == kindDir {
				open[a] = true
				if n, ok := man[a]; ok && n.Kind == kindDir {
					modes[a] = true
				}
			}
		})
	}
	for p, o := range old {
		if n, ok := man[p]; !ok || !sameInTree(o, n) {
			d.remove = append(d.remove, p)
			changed(p)
		}
	}
	for p, n := range man {
		o, ok := old[p]
		switch {
		case !ok || !sameInTree(o, n):
			d.add[p] = n
			changed(p)
			if n.Kind == kindDir {
				modes[p] = true
			}
		case n.Kind == kindDir && o.Mode != n.Mode:
			modes[p] = true
			changed(p)
		}
	}
	slices.Sort(d.remove)
	d.open = slices.Sorted(maps.Keys(open))
	d.modes = slices.Sorted(maps.Keys(modes))
	return d
}

// sameInTree reports whether two entries at one path make the same thing
// in a tree: the same file content and mode, link target, or a directory
// (whatever its mode).
func sameInTree(a, b entry) bool {
	if a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case kindFile:
		return a.Hash == b.Hash && a.Mode == b.Mode
	case kindLink:
		return a.Target == b.Target
	}
	return true
}
