package interp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// maxCacheBytes bounds the cache file read at startup: a host with a
// hundred interpreters needs a few tens of KiB.
const maxCacheBytes = 1 << 20

// probeCache keeps the probe answers of one start for the next: a server
// that restarts on a host whose interpreters did not change runs none of
// them (on a slow or emulated CPU each probe is seconds). An answer is
// reused only while every file it was learned from — the binary, its
// libpython, its prefixes and standard library directories — has the same
// identity (device, inode, size, modification and change times): replacing
// or upgrading any of them, which package managers and pyenv do by
// renaming, changes those, and the interpreter is probed again. The file
// is trusted only if it is a regular file of this process's user that no
// one else may write, since its answers choose what jails mount; anything
// else about it means probing as if there were none.
type probeCache struct {
	path string

	mu   sync.Mutex
	old  map[string]cacheEntry // read at the start, by resolved binary
	next map[string]cacheEntry // what this discovery probed or reused
	miss bool                  // something was probed: write next back
}

// cacheFile is the file's content.
type cacheFile struct {
	// Script is the digest of the probe script the answers came from and
	// of the cache's format: a pyexec asking or checking something else
	// discards them.
	Script  string                `json:"script"`
	Answers map[string]cacheEntry `json:"answers"`
}

// cacheEntry is one interpreter's answer and the files it depends on.
type cacheEntry struct {
	Files  []fileID    `json:"files"`
	Answer probeResult `json:"answer"`
}

// fileID identifies a file's content without reading it.
type fileID struct {
	Path  string `json:"path"`
	Dev   uint64 `json:"dev"`
	Ino   uint64 `json:"ino"`
	Size  int64  `json:"size"`
	Mtime int64  `json:"mtime_ns"`
	Ctime int64  `json:"ctime_ns"`
}

// cacheFormat names what an entry's files are (the binary first, then
// libpython, the prefixes and the standard library directories): a pyexec
// that checks other files reads another format and discards the answers.
const cacheFormat = "files: binary, libs, prefixes, stdlib; identity: dev, ino, size, mtime, ctime\n"

func scriptDigest() string {
	sum := sha256.Sum256([]byte(cacheFormat + probeScript))
	return hex.EncodeToString(sum[:])
}

// openCache reads path's answers; a missing, foreign or unreadable file
// gives an empty cache (the reason for the log), never an error. An empty
// path disables caching.
func openCache(path string) (*probeCache, error) {
	if path == "" {
		return nil, nil
	}
	c := &probeCache{path: path, old: map[string]cacheEntry{}, next: map[string]cacheEntry{}}
	f, err := readTrusted(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	if f.Script == scriptDigest() && f.Answers != nil {
		c.old = f.Answers
	}
	return c, nil
}

// readTrusted reads the cache file if this process's user owns it and
// only that user may write it.
func readTrusted(path string) (cacheFile, error) {
	var f cacheFile
	file, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return f, err
	}
	defer file.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(file.Fd()), &st); err != nil {
		return f, err
	}
	switch {
	case st.Mode&syscall.S_IFMT != syscall.S_IFREG:
		return f, fmt.Errorf("%s is not a regular file", path)
	case int(st.Uid) != os.Geteuid():
		return f, fmt.Errorf("%s belongs to uid %d, not to this process's %d", path, st.Uid, os.Geteuid())
	case st.Mode&0o022 != 0:
		return f, fmt.Errorf("%s may be written by others (mode %o)", path, st.Mode&0o777)
	}
	b, err := io.ReadAll(io.LimitReader(file, maxCacheBytes+1))
	if err != nil {
		return f, err
	}
	if len(b) > maxCacheBytes {
		return f, fmt.Errorf("%s is larger than %d bytes", path, maxCacheBytes)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return cacheFile{}, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// lookup returns real's answer from the last start if every file it was
// learned from is unchanged.
func (c *probeCache) lookup(real string) (probeResult, bool) {
	if c == nil {
		return probeResult{}, false
	}
	c.mu.Lock()
	e, ok := c.old[real]
	c.mu.Unlock()
	if !ok || len(e.Files) == 0 || e.Files[0].Path != real {
		return probeResult{}, false
	}
	for _, want := range e.Files {
		got, err := identify(want.Path)
		if err != nil || got != want {
			return probeResult{}, false
		}
	}
	c.mu.Lock()
	c.next[real] = e
	c.mu.Unlock()
	return e.Answer, true
}

// store keeps the answer the binary identified by bin (before it ran) just
// gave, with the identities of the files it depends on as they are now. It
// keeps nothing if the binary changed meanwhile, or if a file cannot be
// identified: that interpreter is probed again next time.
func (c *probeCache) store(bin fileID, r probeResult) {
	if c == nil {
		return
	}
	real := bin.Path
	paths := append([]string{real}, r.Libs...)
	paths = append(paths, r.Prefixes...)
	paths = append(paths, r.Stdlib...)
	files := make([]fileID, 0, len(paths))
	seen := map[string]bool{}
	for i, p := range paths {
		if seen[p] {
			continue
		}
		seen[p] = true
		id, err := identify(p)
		if err != nil || (i == 0 && id != bin) {
			c.mu.Lock()
			c.miss = true
			c.mu.Unlock()
			return
		}
		files = append(files, id)
	}
	c.mu.Lock()
	c.next[real] = cacheEntry{Files: files, Answer: r}
	c.miss = true
	c.mu.Unlock()
}

// save writes what this discovery probed or reused, replacing the file
// in one rename, if anything was probed; the answers of binaries no longer
// found are dropped.
func (c *probeCache) save() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.miss && len(c.next) == len(c.old) {
		return nil
	}
	b, err := json.Marshal(cacheFile{Script: scriptDigest(), Answers: c.next})
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), filepath.Base(c.path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, there is nothing left to remove
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), c.path)
}

// identify stats path without following a final symlink.
func identify(path string) (fileID, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return fileID{}, err
	}
	return fileID{Path: path, Dev: uint64(st.Dev), Ino: st.Ino, Size: st.Size,
		Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}, nil
}
