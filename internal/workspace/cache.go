package workspace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// The node's blob cache: one file per blob under blobs/<2 hex>/<hash>. On
// one node it is the store of record; in a fleet it holds what this node
// fetched or wrote, and blobs missing from it are fetched from the store.
//
// Version trees hard-link their files to these blobs, so a blob's inode
// attributes (owner, mode, modification time) are those of the files that
// link to it: a new blob takes the attributes of the first file that
// brings it. A file with the same content but another mode links to a copy
// made once under variants/ (at most one per mode a file may have, the
// bits of 0o755); one that differs only in its modification time links to
// the blob itself and shows the blob's time in the tree (the manifest
// keeps each version's own). So touching files makes no copies. A blob is
// never changed once in place.
//
// Bytes from outside (API writes, uploads) are staged first: written to a
// named file under tmp/ and placed as a blob only once the write is known
// to fit, so a refused write leaves nothing behind.

// attrs are the inode attributes a tree needs of a file.
type attrs struct {
	Mode  uint32 // permission bits
	MTime int64  // Unix nanoseconds
}

type cache struct {
	blobs, variants, tmp string
	uid, gid             int // owner of linked files; -1: leave as created
	remote               blobStore
}

func hashBytes(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// A file blob's hash is salted with its owner: SHA-256 of the SHA-256 of
// the owner's name, then the content. So deduplication happens within a
// key only, and no key can learn by the store's growth (or a fleet commit's
// time) whether another key holds some content. Manifest documents are
// not salted: they name salted hashes already.

// saltOf is the prefix of owner's file hashes.
func saltOf(owner string) []byte {
	s := sha256.Sum256([]byte(owner))
	return s[:]
}

// fileHash is the hash of content b as a file of owner's.
func fileHash(owner string, b []byte) string {
	h := sha256.New()
	h.Write(saltOf(owner))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func shard(dir, h string) string { return filepath.Join(dir, h[:2], h) }

func (c *cache) path(h string) string { return shard(c.blobs, h) }

// has reports whether a blob is in this node's cache.
func (c *cache) has(h string) bool {
	_, err := os.Lstat(c.path(h))
	return err == nil
}

// errTooBig ends an ingest that read more than its limit.
var errTooBig = errors.New("larger than allowed")

// ingest copies r into the cache as a blob and returns its hash (salted
// with salt: nil for a manifest document) and size. More than limit bytes
// fail with errTooBig. A new blob takes a's attributes; one already cached
// is left as it is.
func (c *cache) ingest(r io.Reader, limit int64, a attrs, salt []byte) (string, int64, error) {
	f, err := c.tempFile()
	if err != nil {
		return "", 0, fmt.Errorf("caching a blob: %w", err)
	}
	defer f.discard()
	h := sha256.New()
	h.Write(salt)
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, limit+1))
	if err != nil {
		return "", 0, fmt.Errorf("caching a blob: %w", err)
	}
	if n > limit {
		return "", 0, errTooBig
	}
	sum := hex.EncodeToString(h.Sum(nil))
	return sum, n, c.place(f, sum, a)
}

// putDoc caches a manifest root or page.
func (c *cache) putDoc(b []byte) (string, error) {
	h, _, err := c.ingest(bytes.NewReader(b), int64(len(b)), attrs{Mode: 0o444}, nil)
	return h, err
}

// place gives the temporary file f the attributes a and links it as blob
// h, unless the blob is already there.
func (c *cache) place(f *tempFile, h string, a attrs) error {
	dst := c.path(h)
	if _, err := os.Lstat(dst); err == nil {
		return nil
	}
	if err := c.setAttrs(f, a); err != nil {
		return fmt.Errorf("caching blob %s: %w", h, err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return fmt.Errorf("caching blob %s: %w", h, err)
	}
	// A link, not a rename: when two callers cache the same content at
	// once, the first blob stays as it is and the second copy goes.
	if err := f.link(dst); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("caching blob %s: %w", h, err)
	}
	return nil
}

func (c *cache) setAttrs(f *tempFile, a attrs) error {
	if c.uid >= 0 {
		if err := f.Chown(c.uid, c.gid); err != nil {
			return err
		}
	}
	if err := f.Chmod(os.FileMode(a.Mode)); err != nil {
		return err
	}
	t := time.Unix(0, a.MTime)
	return os.Chtimes(f.path, t, t)
}

// ensure makes blob h (salted with salt) present in the cache, fetching it
// from the store when this node lacks it; a fetched blob takes a's
// attributes. On one node a missing blob is corruption.
func (c *cache) ensure(ctx context.Context, h string, a attrs, salt []byte) error {
	if c.has(h) {
		return nil
	}
	if c.remote == nil {
		return fmt.Errorf("%w: blob %s is missing", ErrCorrupt, h)
	}
	f, err := c.tempFile()
	if err != nil {
		return fmt.Errorf("fetching blob %s: %w", h, err)
	}
	defer f.discard()
	sum := sha256.New()
	sum.Write(salt)
	if err := c.remote.get(ctx, h, io.MultiWriter(f, sum)); err != nil {
		return err
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != h {
		return fmt.Errorf("%w: blob %s holds content hashing to %s", ErrCorrupt, h, got)
	}
	return c.place(f, h, a)
}

// readDoc returns a manifest root or page, fetched if need be, checked
// against its hash.
func (c *cache) readDoc(ctx context.Context, h string) ([]byte, error) {
	if err := c.ensure(ctx, h, attrs{Mode: 0o444}, nil); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(c.path(h))
	if err != nil {
		return nil, fmt.Errorf("reading blob %s: %w", h, err)
	}
	if hashBytes(b) != h {
		return nil, fmt.Errorf("%w: blob %s does not match its hash", ErrCorrupt, h)
	}
	return b, nil
}

// upload makes sure the store of record holds blob h (a no-op on one
// node, where the cache is the store).
func (c *cache) upload(ctx context.Context, h string) error {
	if c.remote == nil {
		return nil
	}
	ok, err := c.remote.has(ctx, h)
	if err != nil || ok {
		return err
	}
	f, err := os.Open(c.path(h))
	if err != nil {
		return fmt.Errorf("uploading blob %s: %w", h, err)
	}
	defer f.Close()
	return c.remote.put(ctx, h, f)
}

// linkSource returns a cached file with content h and mode a.Mode, to
// hard-link into a tree: the blob itself when its mode is a's, else a
// variant copied from it once with that mode and the blob's time.
func (c *cache) linkSource(h string, a attrs) (string, error) {
	src := c.path(h)
	if c.matches(src, a) {
		return src, nil
	}
	v := shard(c.variants, h) + "-" + strconv.FormatUint(uint64(a.Mode), 8)
	if fi, err := os.Lstat(src); err == nil {
		a.MTime = fi.ModTime().UnixNano() // a variant differs in its mode only
	}
	if _, err := os.Lstat(v); err == nil {
		return v, nil
	}
	if err := os.MkdirAll(filepath.Dir(v), 0o700); err != nil {
		return "", fmt.Errorf("copying blob %s: %w", h, err)
	}
	// Another builder making the same variant at once is no error.
	if err := c.copyTo(src, v, a); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("copying blob %s: %w", h, err)
	}
	return v, nil
}

// copyTo copies the file src to dst (through a temporary file linked in
// place, so dst is whole or absent) with attributes a.
func (c *cache) copyTo(src, dst string, a attrs) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	f, err := c.tempFile()
	if err != nil {
		return err
	}
	defer f.discard()
	if _, err := io.Copy(f, in); err != nil {
		return err
	}
	if err := c.setAttrs(f, a); err != nil {
		return err
	}
	return f.link(dst)
}

func (c *cache) matches(name string, a attrs) bool {
	fi, err := os.Lstat(name)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || uint32(fi.Mode().Perm()) != a.Mode {
		return false
	}
	return c.uid < 0 || (int(st.Uid) == c.uid && int(st.Gid) == c.gid)
}

// staged is content from outside written to a named temporary file and
// hashed, not yet a blob.
type staged struct {
	path, hash string
	size       int64
}

// stage writes r (more than limit bytes fail with errTooBig) to a named
// temporary file and hashes it, salted with salt. The caller places or
// drops it.
func (c *cache) stage(r io.Reader, limit int64, salt []byte) (staged, error) {
	f, err := os.CreateTemp(c.tmp, "stage-")
	if err != nil {
		return staged{}, fmt.Errorf("staging a file: %w", err)
	}
	s := staged{path: f.Name()}
	h := sha256.New()
	h.Write(salt)
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, limit+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		err = fmt.Errorf("staging a file: %w", err)
	case n > limit:
		err = errTooBig
	}
	if err != nil {
		s.drop()
		return staged{}, err
	}
	s.hash, s.size = hex.EncodeToString(h.Sum(nil)), n
	return s, nil
}

// drop removes a staged file that was not placed (no harm once placed).
func (s staged) drop() {
	if s.path != "" {
		os.Remove(s.path)
	}
}

// placeStaged makes s the blob s.hash with attributes a, unless that blob
// is there already, and removes the staged name.
func (c *cache) placeStaged(s staged, a attrs) error {
	defer s.drop()
	dst := c.path(s.hash)
	if _, err := os.Lstat(dst); err == nil {
		return nil
	}
	err := c.chownPath(s.path)
	if err == nil {
		err = os.Chmod(s.path, os.FileMode(a.Mode))
	}
	if err == nil {
		t := time.Unix(0, a.MTime)
		err = os.Chtimes(s.path, t, t)
	}
	if err == nil {
		err = os.MkdirAll(filepath.Dir(dst), 0o700)
	}
	if err == nil {
		if err = os.Link(s.path, dst); errors.Is(err, os.ErrExist) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("caching blob %s: %w", s.hash, err)
	}
	return nil
}

func (c *cache) chownPath(p string) error {
	if c.uid < 0 {
		return nil
	}
	return os.Chown(p, c.uid, c.gid)
}
