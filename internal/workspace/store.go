package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// What is kept of record, behind two small interfaces: records (the
// workspaces and their versions, small JSON values under keys, changed by
// compare-and-set) and blobs (file contents and manifest pages, named by
// their SHA-256). On one node records are files under the workspace
// directory and blobStore is nil: the node's blob cache is the store of
// record. In a fleet both live in JetStream (store_nats.go) and the cache
// only caches.

// records keeps small values by key. Keys are dot-separated tokens of
// [A-Za-z0-9_-] (what a NATS KV key allows).
type records interface {
	// get returns a value and its revision; ErrNotFound when absent.
	get(ctx context.Context, key string) ([]byte, uint64, error)
	// create stores a value under a key that holds none; ErrExists else.
	create(ctx context.Context, key string, val []byte) (uint64, error)
	// update replaces the value of revision rev; errRevision when the key
	// changed since (or is gone).
	update(ctx context.Context, key string, val []byte, rev uint64) (uint64, error)
	// put stores a value whatever the key held.
	put(ctx context.Context, key string, val []byte) error
	// remove deletes a key; removing an absent key is no error.
	remove(ctx context.Context, key string) error
	// keys lists the keys starting with prefix (which ends with "."), in
	// no set order.
	keys(ctx context.Context, prefix string) ([]string, error)
}

// blobStore keeps blobs of record for a fleet.
type blobStore interface {
	// has reports whether a blob is stored; when it is, its age for the
	// collector starts again (a commit is about to reference it).
	has(ctx context.Context, hash string) (bool, error)
	// put stores a blob read from r (whose SHA-256 is hash).
	put(ctx context.Context, hash string, r io.Reader) error
	// get writes a blob to w; ErrNotFound when there is none.
	get(ctx context.Context, hash string, w io.Writer) error
	// list lists every blob with the time it was stored or last touched.
	list(ctx context.Context) ([]storedBlob, error)
	// remove deletes a blob.
	remove(ctx context.Context, hash string) error
	// size is what the blobs take in the store, in bytes.
	size(ctx context.Context) (int64, error)
}

type storedBlob struct {
	Hash    string
	Size    int64
	ModTime time.Time
}

// dirRecords keeps records as files of one directory, one per key, each
// holding its revision on the first line. One process uses a directory
// (the server owns its data directory); a mutex orders its calls, and
// every write goes through a temporary file, fsync and rename, so a crash
// leaves either the old value or the new.
type dirRecords struct {
	dir     string
	mu      sync.Mutex
	lastRev uint64
}

var _ records = (*dirRecords)(nil)

func newDirRecords(dir string) (*dirRecords, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the records directory: %w", err)
	}
	return &dirRecords{dir: dir}, nil
}

func (d *dirRecords) file(key string) (string, error) {
	if key == "" || strings.ContainsAny(key, "/\x00") || strings.HasPrefix(key, ".") {
		return "", fmt.Errorf("%w: record key %q", ErrInvalid, key)
	}
	return filepath.Join(d.dir, key), nil
}

func (d *dirRecords) read(key string) ([]byte, uint64, error) {
	name, err := d.file(key)
	if err != nil {
		return nil, 0, err
	}
	b, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, fmt.Errorf("%w: record %s", ErrNotFound, key)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("reading record %s: %w", key, err)
	}
	line, val, ok := bytes.Cut(b, []byte("\n"))
	rev, perr := strconv.ParseUint(string(line), 10, 64)
	if !ok || perr != nil {
		return nil, 0, fmt.Errorf("%w: record %s has no revision", ErrCorrupt, key)
	}
	return val, rev, nil
}

// nextRev is a revision larger than any given before by this process and
// (clocks going forward) by any process before it: the key's revision
// must not repeat when a key is deleted and created again.
func (d *dirRecords) nextRev() uint64 {
	d.lastRev = max(d.lastRev+1, uint64(time.Now().UnixNano()))
	return d.lastRev
}

func (d *dirRecords) write(key string, val []byte) (uint64, error) {
	name, err := d.file(key)
	if err != nil {
		return 0, err
	}
	rev := d.nextRev()
	f, err := os.CreateTemp(d.dir, ".tmp-")
	if err != nil {
		return 0, fmt.Errorf("writing record %s: %w", key, err)
	}
	defer os.Remove(f.Name())
	_, err = fmt.Fprintf(f, "%d\n", rev)
	if err == nil {
		_, err = f.Write(val)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err == nil {
		err = syncDir(d.dir)
	}
	if err != nil {
		return 0, fmt.Errorf("writing record %s: %w", key, err)
	}
	return rev, nil
}

func (d *dirRecords) get(_ context.Context, key string) ([]byte, uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.read(key)
}

func (d *dirRecords) create(_ context.Context, key string, val []byte) (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, _, err := d.read(key); !errors.Is(err, ErrNotFound) {
		if err == nil {
			err = fmt.Errorf("%w: record %s", ErrExists, key)
		}
		return 0, err
	}
	return d.write(key, val)
}

func (d *dirRecords) update(_ context.Context, key string, val []byte, rev uint64) (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, cur, err := d.read(key)
	if errors.Is(err, ErrNotFound) || (err == nil && cur != rev) {
		return 0, fmt.Errorf("%w: record %s", errRevision, key)
	}
	if err != nil {
		return 0, err
	}
	return d.write(key, val)
}

func (d *dirRecords) put(_ context.Context, key string, val []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, err := d.write(key, val)
	return err
}

func (d *dirRecords) remove(_ context.Context, key string) error {
	name, err := d.file(key)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing record %s: %w", key, err)
	}
	return nil
}

func (d *dirRecords) keys(_ context.Context, prefix string) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ents, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, fmt.Errorf("listing records: %w", err)
	}
	var out []string
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, prefix) && !strings.HasPrefix(n, ".") {
			out = append(out, n)
		}
	}
	return out, nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
