package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Collection: blobs no kept version references are removed, and so are
// the trees of versions no run uses that are no workspace's current one.
// Versions themselves are pruned at each commit (prune).
//
// On one node the collector and every writer share m.gcMu, so no blob is
// taken between being cached and being named by a head. In a fleet other
// nodes' writers cannot take that lock: a blob of the store is removed
// only when it is older than GCGrace — its upload, or the last time a
// commit found it there and touched it — which a commit must not outlast.

// GCGrace is how old an unreferenced blob of a fleet's store must be to
// be removed: longer than any commit takes.
const GCGrace = time.Hour

// GCStats reports a collection.
type GCStats struct {
	Versions     int   `json:"versions"`      // versions kept, all workspaces
	Blobs        int   `json:"blobs"`         // blobs they reference
	BlobsRemoved int   `json:"blobs_removed"` // from the store of record
	BytesRemoved int64 `json:"bytes_removed"`
	CacheRemoved int   `json:"cache_removed"` // blobs and variants dropped from this node's cache
	TreesRemoved int   `json:"trees_removed"`
}

// CollectEvery is how often Collect runs a collection unprompted.
const CollectEvery = 10 * time.Minute

// collectSoon asks Collect for a collection without waiting for it.
func (m *Manager) collectSoon() {
	select {
	case m.collect <- struct{}{}:
	default: // one is asked for already
	}
}

// Collect runs GC every interval and whenever a Delete or a refused API
// write asks for one, until ctx ends; the server runs it for its
// lifetime. Each collection that removed something, or failed, is logged.
func (m *Manager) Collect(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.collect:
		}
		st, err := m.GC(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			m.log.Warn("workspace collection failed", "err", err)
		case err == nil && st.BlobsRemoved+st.CacheRemoved+st.TreesRemoved > 0:
			m.log.Info("workspace collection", "versions", st.Versions, "blobs", st.Blobs, "blobs_removed", st.BlobsRemoved,
				"bytes_removed", st.BytesRemoved, "cache_removed", st.CacheRemoved, "trees_removed", st.TreesRemoved)
		}
	}
}

// GC removes what no kept version needs. In a fleet one node at a time
// should run it (any node may: it is safe, only wasteful, to run twice).
func (m *Manager) GC(ctx context.Context) (GCStats, error) {
	m.gcMu.Lock()
	defer m.gcMu.Unlock()
	var st GCStats
	live, heads, err := m.mark(ctx, &st)
	if err != nil {
		return st, err
	}
	st.Blobs = len(live)
	if m.cache.remote != nil {
		if err := m.sweepStore(ctx, live, &st); err != nil {
			return st, err
		}
	}
	if err := m.sweepCache(live, &st); err != nil {
		return st, err
	}
	return st, m.sweepTrees(heads, &st)
}

// mark returns every blob hash a kept version references (roots, pages,
// files) and the roots of current versions.
func (m *Manager) mark(ctx context.Context, st *GCStats) (live, heads map[string]bool, err error) {
	recs, err := m.listRecords(ctx, AllOwners)
	if err != nil {
		return nil, nil, err
	}
	live, heads = map[string]bool{}, map[string]bool{}
	for _, rec := range recs {
		heads[rec.Head.Root] = true
		roots := []string{rec.Head.Root}
		nums, err := m.versionNumbers(ctx, rec.ID)
		if err != nil {
			return nil, nil, err
		}
		for _, n := range nums {
			v, err := m.loadVersion(ctx, rec, n)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, nil, err
			}
			roots = append(roots, v.Root)
		}
		st.Versions += len(roots)
		for _, root := range roots {
			if err := m.markRoot(ctx, root, live); err != nil {
				return nil, nil, err
			}
		}
	}
	return live, heads, nil
}

// markRoot adds what one manifest references to live, reading each page
// once however many versions share it.
func (m *Manager) markRoot(ctx context.Context, root string, live map[string]bool) error {
	if live[root] {
		return nil
	}
	live[root] = true
	b, err := m.cache.readDoc(ctx, root)
	if err != nil {
		return err
	}
	doc, err := decodeRoot(b)
	if err != nil {
		return err
	}
	for _, ref := range doc.Pages {
		if live[ref.Hash] {
			continue
		}
		live[ref.Hash] = true
		b, err := m.cache.readDoc(ctx, ref.Hash)
		if err != nil {
			return err
		}
		var pg pageDoc
		if err := strictJSON(b, &pg); err != nil {
			return fmt.Errorf("%w: manifest page %s: %v", ErrCorrupt, ref.Hash, err)
		}
		for _, e := range pg.Entries {
			if e.Kind == kindFile {
				live[e.Hash] = true
			}
		}
	}
	return nil
}

func (m *Manager) sweepStore(ctx context.Context, live map[string]bool, st *GCStats) error {
	blobs, err := m.cache.remote.list(ctx)
	if err != nil {
		return err
	}
	for _, b := range blobs {
		if live[b.Hash] || m.now().Sub(b.ModTime) < GCGrace {
			continue
		}
		if err := m.cache.remote.remove(ctx, b.Hash); err != nil {
			return err
		}
		st.BlobsRemoved++
		st.BytesRemoved += b.Size
	}
	return nil
}

// sweepCache removes the cached blobs no kept version references (on one
// node that is the store of record) and the variants no tree links.
func (m *Manager) sweepCache(live map[string]bool, st *GCStats) error {
	local := m.cache.remote == nil
	err := filepath.WalkDir(m.cache.blobs, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || live[d.Name()] {
			return err
		}
		size := fileSize(d)
		if err := os.Remove(p); err != nil {
			return err
		}
		st.CacheRemoved++
		if local {
			st.BlobsRemoved++
			st.BytesRemoved += size
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sweeping the blob cache: %w", err)
	}
	err = filepath.WalkDir(m.cache.variants, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		hash, _, _ := strings.Cut(d.Name(), "-")
		if live[hash] && links(d) > 1 {
			return nil
		}
		st.CacheRemoved++
		return os.Remove(p)
	})
	if err != nil {
		return fmt.Errorf("sweeping the blob cache: %w", err)
	}
	return nil
}

// sweepTrees removes the trees of versions that are no workspace's
// current one and that no run has mounted; a run on them later builds
// them again from the cache. A tree is checked and moved out of trees/
// in one step under m.mu (takeTree): a Prepare that counts itself in use
// after that finds no tree and builds one, never a tree being removed.
func (m *Manager) sweepTrees(heads map[string]bool, st *GCStats) error {
	ents, err := os.ReadDir(m.dirs.trees)
	if err != nil {
		return fmt.Errorf("sweeping trees: %w", err)
	}
	for _, e := range ents {
		root := e.Name()
		if heads[root] || strings.HasPrefix(root, ".") {
			continue
		}
		gone, err := m.takeTree(root, 0)
		if err != nil {
			return err
		}
		if gone == "" { // mounted (or gone) meanwhile
			continue
		}
		if err := removeTree(gone); err != nil {
			return err
		}
		st.TreesRemoved++
	}
	return nil
}

// removeTree removes a tree, whose directories may be read-only.
func removeTree(dir string) error {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			err = os.Chmod(p, 0o700)
		}
		return err
	})
	if err == nil {
		err = os.RemoveAll(dir)
	}
	if err != nil {
		return fmt.Errorf("removing tree %s: %w", dir, err)
	}
	return nil
}

func fileSize(d fs.DirEntry) int64 {
	if fi, err := d.Info(); err == nil {
		return fi.Size()
	}
	return 0
}

func links(d fs.DirEntry) uint64 {
	if fi, err := d.Info(); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			return uint64(st.Nlink)
		}
	}
	return 0
}

// Stats is what /health and the metrics show of workspaces.
type Stats struct {
	Workspaces int   `json:"workspaces"`
	Bytes      int64 `json:"bytes"`       // their current versions, together
	StoreBytes int64 `json:"store_bytes"` // the store of record: blobs and manifests of every kept version
	CacheBytes int64 `json:"cache_bytes"` // this node's blob cache and variants (on one node: the store)
	Mounts     int   `json:"mounts"`      // runs with a workspace mounted on this node
	// TreesBuilt counts the version trees this node built whole (a hard
	// link per file) since it started; TreesDerived those it derived
	// from the tree of the version before, after a commit (derive.go).
	TreesBuilt   int64 `json:"trees_built"`
	TreesDerived int64 `json:"trees_derived"`
}

// StatsFor is how long a measurement (Stats) is reused: /health and
// every scrape ask for one, and each walks the blob cache.
const StatsFor = 30 * time.Second

// statsCache holds the last measurement; sem lets one caller at a time
// measure, the others wait for its result (or their context).
type statsCache struct {
	sem chan struct{}
	at  time.Time
	st  Stats
}

// Stats measures the workspaces of every key and this node's cache
// (blobs and variants). A measurement is reused for StatsFor, one is made
// at a time, and the walk of the cache stops when ctx ends. Mounts and
// the tree counts are always current.
func (m *Manager) Stats(ctx context.Context) (Stats, error) {
	select {
	case m.stats.sem <- struct{}{}:
	case <-ctx.Done():
		return Stats{}, fmt.Errorf("measuring the workspaces: %w", ctx.Err())
	}
	defer func() { <-m.stats.sem }()
	st := m.stats.st
	if m.stats.at.IsZero() || m.now().Sub(m.stats.at) >= StatsFor {
		var err error
		if st, err = m.measure(ctx); err != nil {
			return Stats{}, err
		}
		m.stats.st, m.stats.at = st, m.now()
	}
	m.mu.Lock()
	st.Mounts = len(m.mounts)
	m.mu.Unlock()
	st.TreesBuilt, st.TreesDerived = m.treesBuilt.Load(), m.treesDerived.Load()
	return st, nil
}

func (m *Manager) measure(ctx context.Context) (Stats, error) {
	recs, err := m.listRecords(ctx, AllOwners)
	if err != nil {
		return Stats{}, err
	}
	var st Stats
	st.Workspaces = len(recs)
	for _, r := range recs {
		st.Bytes += r.Head.Bytes
	}
	for _, dir := range []string{m.cache.blobs, m.cache.variants} {
		err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
			if err == nil {
				err = ctx.Err()
			}
			if err == nil && !d.IsDir() {
				st.CacheBytes += fileSize(d)
			}
			return err
		})
		if err != nil {
			return Stats{}, fmt.Errorf("measuring the blob cache: %w", err)
		}
	}
	st.StoreBytes = st.CacheBytes
	if m.cache.remote != nil {
		if st.StoreBytes, err = m.cache.remote.size(ctx); err != nil {
			return Stats{}, err
		}
	}
	return st, nil
}
