package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
)

// Version trees: each manifest a run mounts is materialised once per node
// as trees/<root hash>, a directory of hard links into the blob cache
// (owned by the sandbox user, with the manifest's modes and times), never
// changed once in place. Overlays stack a run's upper directory on it, so
// mounting a version the node has seen costs nothing that grows with the
// workspace. Equal manifests share a tree (a restored version reuses the
// tree of the version it restores). A commit on this node derives the
// new version's tree from its base's instead of building it (derive.go):
// the base's tree leaves trees/ before it is changed, so a tree in place
// is never changed.

// fetchWorkers bounds the blobs fetched from the store at once.
const fetchWorkers = 8

// tree returns the directory of the tree of manifest root, a version of
// owner's, building it if this node has none.
func (m *Manager) tree(ctx context.Context, root, owner string) (string, error) {
	dir := filepath.Join(m.dirs.trees, root)
	if _, err := os.Lstat(dir); err == nil {
		return dir, nil
	}
	// Building holds off the collector, which would otherwise take a
	// variant made for this tree before the tree links it.
	defer m.writing()()
	unlock := m.treeLocks.lock(root)
	defer unlock()
	if _, err := os.Lstat(dir); err == nil {
		return dir, nil // built while we waited
	}
	man, err := m.manifest(ctx, root)
	if err != nil {
		return "", err
	}
	if err := m.fetchAll(ctx, man, owner); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(m.dirs.trees, ".build-")
	if err != nil {
		return "", fmt.Errorf("building tree %s: %w", root, err)
	}
	defer os.RemoveAll(tmp)
	if err := m.build(tmp, man); err != nil {
		return "", fmt.Errorf("building tree %s: %w", root, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("building tree %s: %w", root, err)
	}
	m.treesBuilt.Add(1)
	return dir, nil
}

// fetchAll makes every file blob of man present in the cache: in a fleet
// this fetches what the node lacks (only what changed since a version it
// has), several at a time.
func (m *Manager) fetchAll(ctx context.Context, man manifest, owner string) error {
	var missing []entry
	seen := map[string]bool{}
	for _, e := range man {
		if e.Kind == kindFile && !seen[e.Hash] && !m.cache.has(e.Hash) {
			seen[e.Hash] = true
			missing = append(missing, e)
		}
	}
	return forEach(ctx, fetchWorkers, missing, func(e entry) error {
		return m.cache.ensure(ctx, e.Hash, attrs{Mode: e.Mode, MTime: e.MTime}, saltOf(owner))
	})
}

// build fills the empty directory dir with man's tree. Directories are
// made writable by their owner while filled and given their modes last,
// deepest first. The manifest was checked (checkTree): a path's parents
// are directories made before it, never links. (Links made by several
// workers at once were no faster here: each costs the file system a
// journal entry.)
func (m *Manager) build(dir string, man manifest) error {
	paths := man.paths()
	for _, p := range paths {
		if err := m.makeEntry(man[p], filepath.Join(dir, filepath.FromSlash(p))); err != nil {
			return err
		}
	}
	for _, p := range slices.Backward(paths) {
		if e := man[p]; e.Kind == kindDir {
			if err := m.ownDir(filepath.Join(dir, filepath.FromSlash(p)), e.Mode); err != nil {
				return err
			}
		}
	}
	return m.ownDir(dir, 0o755)
}

// makeEntry makes e at dst: a directory writable by its owner (its mode
// comes last, from ownDir), a link, or a file linked from the cache.
func (m *Manager) makeEntry(e entry, dst string) error {
	switch e.Kind {
	case kindDir:
		return os.Mkdir(dst, 0o700)
	case kindLink:
		err := os.Symlink(e.Target, dst)
		if err == nil && m.cache.uid >= 0 {
			err = os.Lchown(dst, m.cache.uid, m.cache.gid)
		}
		return err
	case kindFile:
		return m.linkFile(e, dst)
	}
	return fmt.Errorf("%w: manifest entry %s of kind %q", ErrCorrupt, quoted(e.Path), e.Kind)
}

// linkFile hard-links the blob of e to dst, or copies it there when the
// blob has as many links as its file system allows (an empty file in
// every tree of a large fleet of versions).
func (m *Manager) linkFile(e entry, dst string) error {
	a := attrs{Mode: e.Mode, MTime: e.MTime}
	src, err := m.cache.linkSource(e.Hash, a)
	if err != nil {
		return err
	}
	if err := os.Link(src, dst); !errors.Is(err, syscall.EMLINK) {
		return err
	}
	return m.cache.copyTo(src, dst, a)
}

func (m *Manager) ownDir(dir string, mode uint32) error {
	if m.cache.uid >= 0 {
		if err := os.Lchown(dir, m.cache.uid, m.cache.gid); err != nil {
			return err
		}
	}
	return os.Chmod(dir, os.FileMode(mode))
}

// forEach calls f for every item, up to n at once, and returns the first
// error (the others still finish).
func forEach[T any](ctx context.Context, n int, items []T, f func(T) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	work := make(chan T)
	for range min(n, len(items)) {
		wg.Go(func() {
			for it := range work {
				if err := f(it); err != nil {
					mu.Lock()
					first = firstErr(first, err)
					mu.Unlock()
				}
			}
		})
	}
feed:
	for _, it := range items {
		select {
		case work <- it:
		case <-ctx.Done():
			mu.Lock()
			first = firstErr(first, ctx.Err())
			mu.Unlock()
			break feed
		}
	}
	close(work)
	wg.Wait()
	return first
}

func firstErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// keyedLocks serialises work per key (building one tree) and lets work on
// other keys go on.
type keyedLocks struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	sync.Mutex
	users int
}

func (k *keyedLocks) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyedLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyedLock{}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}
