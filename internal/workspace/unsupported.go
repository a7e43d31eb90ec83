//go:build !linux

package workspace

import (
	"context"
	"fmt"
	"os"
)

// Writable workspace mounts need Linux (tmpfs, overlayfs). Elsewhere the
// records and file operations work; Prepare of a read-write mount and
// Commit fail loudly.

func mountTmpfs(string, int64, int) error {
	return fmt.Errorf("%w: writable workspace mounts need Linux", ErrUnsupported)
}

func unmountTmpfs(string) error { return nil }

func isMountPoint(string) bool { return false }

func (m *Manager) scan(context.Context, string, manifest, wsRecord) (changeSet, error) {
	return changeSet{}, fmt.Errorf("%w: reading a run's changes needs Linux", ErrUnsupported)
}

// syncStore cannot sync the blob store as a whole off Linux: a crash may
// lose blobs of the last commits there.
func (c *cache) syncStore() error { return nil }

// tempFile is a file being written into the cache, linked into place once
// whole.
type tempFile struct {
	*os.File
	path string
}

func (c *cache) tempFile() (*tempFile, error) {
	f, err := os.CreateTemp(c.tmp, "blob-")
	if err != nil {
		return nil, err
	}
	return &tempFile{File: f, path: f.Name()}, nil
}

func (t *tempFile) link(dst string) error { return os.Link(t.path, dst) }

func (t *tempFile) discard() {
	t.Close()
	os.Remove(t.path)
}
