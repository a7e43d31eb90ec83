package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// File operations for the API and MCP tools. Reads take a version (Head
// for the current one); every change is a change set against the current
// version, committed as a run's is.

// Head names a workspace's current version in reads.
const Head int64 = -1

// at loads the manifest of version n (Head: the current one).
func (m *Manager) at(ctx context.Context, c Caller, ref Ref, n int64) (wsRecord, verRecord, manifest, error) {
	rec, _, err := m.find(ctx, c, ref)
	if err != nil {
		return wsRecord{}, verRecord{}, nil, err
	}
	v := rec.Head
	if n != Head {
		if v, err = m.loadVersion(ctx, rec, n); err != nil {
			return wsRecord{}, verRecord{}, nil, err
		}
	}
	man, err := m.manifest(ctx, v.Root)
	return rec, v, man, err
}

// head loads the workspace ref names, as c may see it, and the manifest
// of its current version: the base of an API write.
func (m *Manager) head(ctx context.Context, c Caller, ref Ref) (wsRecord, string, manifest, error) {
	rec, key, err := m.find(ctx, c, ref)
	if err != nil {
		return wsRecord{}, "", nil, err
	}
	man, err := m.manifest(ctx, rec.Head.Root)
	return rec, key, man, err
}

// Files lists what is inside dir ("" for all) at version n, sorted by
// path, directories and links included.
func (m *Manager) Files(ctx context.Context, c Caller, ref Ref, n int64, dir string) ([]File, error) {
	d, err := cleanDir(dir)
	if err != nil {
		return nil, err
	}
	_, _, man, err := m.at(ctx, c, ref, n)
	if err != nil {
		return nil, err
	}
	if e, ok := man[d]; d != "" && (!ok || e.Kind != kindDir) {
		return nil, fmt.Errorf("%w: directory %s", ErrNotFound, quoted(d))
	}
	paths := man.under(d)
	out := make([]File, len(paths))
	for i, p := range paths {
		out[i] = man[p].file()
	}
	return out, nil
}

// Open opens the file at path at version n for reading; the caller closes
// it. A directory or a link is ErrInvalid.
func (m *Manager) Open(ctx context.Context, c Caller, ref Ref, n int64, path string) (io.ReadCloser, File, error) {
	p, err := cleanPath(path)
	if err != nil {
		return nil, File{}, err
	}
	rec, _, man, err := m.at(ctx, c, ref, n)
	if err != nil {
		return nil, File{}, err
	}
	e, ok := man[p]
	if !ok {
		return nil, File{}, fmt.Errorf("%w: file %s", ErrNotFound, quoted(p))
	}
	if e.Kind != kindFile {
		return nil, File{}, fmt.Errorf("%w: %s is a %s, not a file", ErrInvalid, quoted(p), e.file().Type)
	}
	f, err := m.openBlob(ctx, e, rec.Owner)
	if err != nil {
		return nil, File{}, err
	}
	return f, e.file(), nil
}

// openBlob opens the blob of e, a file of owner's.
func (m *Manager) openBlob(ctx context.Context, e entry, owner string) (*os.File, error) {
	if err := m.cache.ensure(ctx, e.Hash, attrs{Mode: e.Mode, MTime: e.MTime}, saltOf(owner)); err != nil {
		return nil, err
	}
	f, err := os.Open(m.cache.path(e.Hash))
	if err != nil {
		return nil, fmt.Errorf("opening blob %s: %w", e.Hash, err)
	}
	return f, nil
}

// WriteFile writes r (at most maxBytes) as the file at path, creating its
// folders; mode keeps the bits 0o755 as uploads do (zero: 0o644).
func (m *Manager) WriteFile(ctx context.Context, c Caller, ref Ref, path string, r io.Reader, mode fs.FileMode, maxBytes int64) (Commit, error) {
	p, err := cleanPath(path)
	if err != nil {
		return Commit{}, err
	}
	rec, key, base, err := m.head(ctx, c, ref)
	if err != nil {
		return Commit{}, err
	}
	a := attrs{Mode: uploadMode(mode), MTime: m.now().UnixNano()}
	defer m.writing()()
	// The bytes go to a staged file no larger than the room left, and
	// become a blob only once the whole change is known to fit.
	room, what, err := m.roomFor(ctx, rec, base)
	if err != nil {
		return Commit{}, err
	}
	if old, ok := base[p]; ok && old.Kind == kindFile {
		room += old.Size
	}
	s, err := m.cache.stage(r, min(maxBytes, max(room, 0)), saltOf(rec.Owner))
	if errors.Is(err, errTooBig) && room < maxBytes {
		return Commit{}, fmt.Errorf("%w: the file does not fit: %s leaves room for %d bytes", ErrQuota, what, max(room, 0))
	}
	if errors.Is(err, errTooBig) {
		return Commit{}, fmt.Errorf("%w: the file is larger than %d bytes", ErrLimit, maxBytes)
	}
	if err != nil {
		return Commit{}, err
	}
	defer s.drop()
	changes := map[string]*entry{}
	if err := putWithParents(base, changes, entry{Path: p, Kind: kindFile, Hash: s.hash, Size: s.size, Mode: a.Mode, MTime: a.MTime}); err != nil {
		return Commit{}, err
	}
	if err := m.fitsBefore(ctx, rec, base, changes); err != nil {
		return Commit{}, err
	}
	if err := m.cache.placeStaged(s, a); err != nil {
		return Commit{}, err
	}
	return m.commitPlaced(ctx, key, rec.ID, changeSet{base: rec.Head, changes: changes, source: "write"})
}

// uploadMode keeps the permission bits an upload may set, as uploads of
// executions do: no group or world write, nothing special.
func uploadMode(mode fs.FileMode) uint32 {
	if mode == 0 {
		return 0o644
	}
	return uint32(mode.Perm()) & 0o755
}

// putWithParents adds e to changes, with a directory for each of its
// parents base lacks. A parent that is a file or link in base, or a file
// to write where base has a directory, is ErrInvalid: an API write never
// replaces one kind by another.
func putWithParents(base manifest, changes map[string]*entry, e entry) error {
	var bad error
	parentDirs(e.Path, func(d string) {
		if bad != nil {
			return
		}
		if b, ok := base[d]; ok && b.Kind != kindDir {
			bad = fmt.Errorf("%w: %s: %s is a %s, not a directory", ErrInvalid, quoted(e.Path), quoted(d), b.file().Type)
			return
		}
		if _, ok := base[d]; !ok && changes[d] == nil {
			changes[d] = &entry{Path: d, Kind: kindDir, Mode: 0o755}
		}
	})
	if bad != nil {
		return bad
	}
	if b, ok := base[e.Path]; ok && (b.Kind == kindDir) != (e.Kind == kindDir) {
		return fmt.Errorf("%w: %s is a %s in the workspace", ErrInvalid, quoted(e.Path), b.file().Type)
	}
	if b, ok := base[e.Path]; ok && b.same(e) {
		return nil // there already
	}
	changes[e.Path] = &e
	return nil
}

// Remove deletes the file, link or folder (with everything in it) at
// path.
func (m *Manager) Remove(ctx context.Context, c Caller, ref Ref, path string) (Commit, error) {
	p, err := cleanPath(path)
	if err != nil {
		return Commit{}, err
	}
	rec, key, base, err := m.head(ctx, c, ref)
	if err != nil {
		return Commit{}, err
	}
	if _, ok := base[p]; !ok {
		return Commit{}, fmt.Errorf("%w: %s", ErrNotFound, quoted(p))
	}
	changes := map[string]*entry{p: nil}
	for _, q := range base.under(p) {
		changes[q] = nil
	}
	defer m.writing()()
	return m.commit(ctx, key, rec.ID, changeSet{base: rec.Head, changes: changes, source: "delete"})
}
