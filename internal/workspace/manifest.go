package workspace

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"
)

// A version's manifest maps every path of the tree to an entry. It is
// stored as content-addressed pages of consecutive entries (sorted by
// path) and a root listing the pages, so that a version differing from its
// parent in one file shares every page but one with it: the change stores
// one page and the root (see docs/workspaces.md for the figures).
//
// Pages end where the hash of an entry's path says so (about one entry in
// pageAverage), not at a fixed count: inserting or deleting a path changes
// only the page it falls in, and the pages after it stay the same bytes.

// Entry kinds.
const (
	kindFile = "f"
	kindDir  = "d"
	kindLink = "l"
)

// entry is one path of a manifest. Directories carry only their mode;
// symbolic links their target; files their content hash, size, mode and
// modification time.
type entry struct {
	Path   string `json:"p"`
	Kind   string `json:"k"`
	Hash   string `json:"h,omitempty"` // SHA-256 of the content, hex
	Target string `json:"t,omitempty"`
	Size   int64  `json:"s,omitempty"`
	Mode   uint32 `json:"m,omitempty"` // permission bits
	MTime  int64  `json:"mt,omitempty"`
}

// same reports whether two entries describe the same thing at a path.
// Directories are the same whatever their mode: a directory is never in
// conflict with itself.
func (e entry) same(o entry) bool {
	if e.Kind == kindDir && o.Kind == kindDir {
		return true
	}
	return e == o
}

// manifest is a version's tree in memory, by path. Once loaded or built it
// is never changed: the merge copies it.
type manifest map[string]entry

// usage is what a manifest holds: bytes of file content, and entries of
// every kind (the count the entry limit holds).
type usage struct {
	Bytes   int64
	Entries int
	Files   int
}

func (m manifest) usage() usage {
	var u usage
	for _, e := range m {
		u.Entries++
		if e.Kind == kindFile {
			u.Files++
			u.Bytes += e.Size
		}
	}
	return u
}

func (m manifest) paths() []string { return slices.Sorted(maps.Keys(m)) }

// under lists the paths strictly inside dir, sorted.
func (m manifest) under(dir string) []string {
	var out []string
	for p := range m {
		if p != dir && under(p, dir) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// Page sizing: a page ends after an entry whose path hashes to
// pageAverage-1 in its low bits, or after pageMax entries.
const (
	pageAverage = 128
	pageMax     = 1024
	rootFormat  = 1
)

type pageRef struct {
	Hash  string `json:"h"`
	First string `json:"f"`
	N     int    `json:"n"`
}

type rootDoc struct {
	Format  int       `json:"format"`
	Entries int       `json:"entries"`
	Files   int       `json:"files"`
	Bytes   int64     `json:"bytes"`
	Pages   []pageRef `json:"pages"`
}

type pageDoc struct {
	Entries []entry `json:"e"`
}

// encoded is a manifest ready to store: its root and its pages, each
// under its content hash.
type encoded struct {
	root     []byte
	rootHash string
	pages    map[string][]byte
}

func pageEnds(p string) bool {
	h := fnv.New32a()
	h.Write([]byte(p))
	return h.Sum32()%pageAverage == pageAverage-1
}

// encode cuts the manifest into pages and a root. The bytes depend on the
// entries alone, so equal manifests encode to equal hashes.
func (m manifest) encode() (encoded, error) {
	u := m.usage()
	doc := rootDoc{Format: rootFormat, Entries: u.Entries, Files: u.Files, Bytes: u.Bytes, Pages: []pageRef{}}
	out := encoded{pages: map[string][]byte{}}
	var cur []entry
	flush := func() error {
		if len(cur) == 0 {
			return nil
		}
		b, err := json.Marshal(pageDoc{Entries: cur})
		if err != nil {
			return fmt.Errorf("encoding a manifest page: %w", err)
		}
		h := hashBytes(b)
		out.pages[h] = b
		doc.Pages = append(doc.Pages, pageRef{Hash: h, First: cur[0].Path, N: len(cur)})
		cur = nil
		return nil
	}
	for _, p := range m.paths() {
		cur = append(cur, m[p])
		if pageEnds(p) || len(cur) == pageMax {
			if err := flush(); err != nil {
				return encoded{}, err
			}
		}
	}
	if err := flush(); err != nil {
		return encoded{}, err
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return encoded{}, fmt.Errorf("encoding a manifest root: %w", err)
	}
	out.root, out.rootHash = b, hashBytes(b)
	return out, nil
}

func decodeRoot(b []byte) (rootDoc, error) {
	var doc rootDoc
	if err := strictJSON(b, &doc); err != nil || doc.Format != rootFormat {
		return rootDoc{}, fmt.Errorf("%w: manifest root: format %d, %v", ErrCorrupt, doc.Format, err)
	}
	for _, ref := range doc.Pages {
		if !validHash(ref.Hash) {
			return rootDoc{}, fmt.Errorf("%w: manifest root names page %q", ErrCorrupt, ref.Hash)
		}
	}
	return doc, nil
}

// decodeManifest builds a manifest from its root and pages (by hash) and
// checks it whole: every path clean, every kind known, every file's hash
// well formed, every link inside, every parent a directory, and the
// counts as the root states. A manifest from the store is trusted no
// further than that: trees are built from it.
func decodeManifest(doc rootDoc, pages map[string][]byte) (manifest, error) {
	m := manifest{}
	prev := ""
	for _, ref := range doc.Pages {
		var pg pageDoc
		if err := strictJSON(pages[ref.Hash], &pg); err != nil || len(pg.Entries) != ref.N || ref.N == 0 {
			return nil, fmt.Errorf("%w: manifest page %s: %v", ErrCorrupt, ref.Hash, err)
		}
		for _, e := range pg.Entries {
			if err := e.check(); err != nil {
				return nil, err
			}
			if e.Path <= prev {
				return nil, fmt.Errorf("%w: manifest paths out of order at %s", ErrCorrupt, quoted(e.Path))
			}
			prev = e.Path
			m[e.Path] = e
		}
	}
	if err := m.checkTree(); err != nil {
		return nil, err
	}
	if u := m.usage(); u.Entries != doc.Entries || u.Files != doc.Files || u.Bytes != doc.Bytes {
		return nil, fmt.Errorf("%w: manifest holds %+v, its root says %d entries, %d files, %d bytes", ErrCorrupt, u, doc.Entries, doc.Files, doc.Bytes)
	}
	return m, nil
}

// check validates one entry on its own.
func (e entry) check() error {
	if p, err := cleanPath(e.Path); err != nil || p != e.Path {
		return fmt.Errorf("%w: manifest path %s", ErrCorrupt, quoted(e.Path))
	}
	ok := false
	switch e.Kind {
	case kindFile:
		ok = validHash(e.Hash) && e.Size >= 0 && e.Mode&^0o777 == 0 && e.Target == ""
	case kindDir:
		ok = e.Hash == "" && e.Size == 0 && e.Mode&^0o777 == 0 && e.Target == "" && e.MTime == 0
	case kindLink:
		ok = e.Hash == "" && e.Size == 0 && linkInside(e.Path, e.Target)
	}
	if !ok {
		return fmt.Errorf("%w: manifest entry %s of kind %q", ErrCorrupt, quoted(e.Path), e.Kind)
	}
	return nil
}

// checkTree checks that every entry's parents are directories of the
// manifest, so that building a tree from it never meets a link or a file
// where it expects a directory.
func (m manifest) checkTree() error {
	for p := range m {
		var bad string
		parentDirs(p, func(d string) {
			if e, ok := m[d]; bad == "" && (!ok || e.Kind != kindDir) {
				bad = d
			}
		})
		if bad != "" {
			return fmt.Errorf("%w: manifest path %s: parent %s is not a directory of it", ErrCorrupt, quoted(p), quoted(bad))
		}
	}
	return nil
}

func validHash(h string) bool {
	if len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil && strings.ToLower(h) == h
}

func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// File describes one path of a workspace version, as listings show it.
type File struct {
	Path    string      `json:"path"`
	Type    string      `json:"type"` // "file", "dir" or "symlink"
	Size    int64       `json:"size"`
	Mode    fs.FileMode `json:"mode"`
	ModTime time.Time   `json:"mtime,omitzero"`
	SHA256  string      `json:"sha256,omitempty"`
	Target  string      `json:"target,omitempty"` // of a symbolic link
}

func (e entry) file() File {
	f := File{Path: e.Path, Size: e.Size, Mode: fs.FileMode(e.Mode), SHA256: e.Hash, Target: e.Target}
	switch e.Kind {
	case kindFile:
		f.Type = "file"
		f.ModTime = time.Unix(0, e.MTime).UTC()
	case kindDir:
		f.Type = "dir"
	case kindLink:
		f.Type = "symlink"
	}
	return f
}
