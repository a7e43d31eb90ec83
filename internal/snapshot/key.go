package snapshot

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// KeyFile is the server's snapshot key under its data directory.
const KeyFile = "snapshot.key"

// Key is the server's secret that snapshots are authenticated with. Every
// node of a fleet needs the same key to restore the others' snapshots:
// the operator gives it to each (ParseKey), or copies one node's KeyFile.
type Key struct{ b [32]byte }

// IsZero reports whether k was never set (no key is all zeros).
func (k Key) IsZero() bool { return k.b == [32]byte{} }

// String never shows the key.
func (Key) String() string { return "snapshot.Key(redacted)" }

// ErrKey: a key file or setting that cannot be used as it is.
var ErrKey = errors.New("unusable snapshot key")

// ParseKey reads a key given as 64 hexadecimal digits.
func ParseKey(s string) (Key, error) {
	var k Key
	raw, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(raw) != len(k.b) {
		return Key{}, fmt.Errorf("%w: want %d hexadecimal digits", ErrKey, 2*len(k.b))
	}
	copy(k.b[:], raw)
	return k, nil
}

// LoadKey returns the key kept in dir's KeyFile, creating it (mode 0600)
// the first time. A key file that others may read, that is not a regular
// file, or that does not hold a key is an error: it is never replaced.
func LoadKey(dir string) (Key, error) {
	path := filepath.Join(dir, KeyFile)
	k, err := readKey(path)
	if !errors.Is(err, os.ErrNotExist) {
		return k, err
	}
	if _, err := rand.Read(k.b[:]); err != nil {
		return Key{}, fmt.Errorf("making the snapshot key: %w", err)
	}
	// Written whole under another name, then linked into place: a crash
	// leaves no half key, and of two servers starting at once one key wins.
	tmp, err := os.CreateTemp(dir, ".snapshot-key-*")
	if err != nil {
		return Key{}, fmt.Errorf("making the snapshot key: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := io.WriteString(tmp, hex.EncodeToString(k.b[:])+"\n")
	serr := tmp.Sync()
	if err := errors.Join(werr, serr, tmp.Close()); err != nil {
		return Key{}, fmt.Errorf("making the snapshot key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, os.ErrExist) {
		return Key{}, fmt.Errorf("making the snapshot key: %w", err)
	}
	return readKey(path)
}

func readKey(path string) (Key, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return Key{}, err
	}
	switch {
	case !st.Mode().IsRegular():
		return Key{}, fmt.Errorf("%w: %s is not a regular file", ErrKey, path)
	case st.Mode().Perm()&0o077 != 0:
		return Key{}, fmt.Errorf("%w: %s may be read by others (mode %04o): make it 0600", ErrKey, path, st.Mode().Perm())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return Key{}, fmt.Errorf("reading the snapshot key: %w", err)
	}
	k, err := ParseKey(string(raw))
	if err != nil {
		return Key{}, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// Receive copies a snapshot from src (a store's stream) into an unlinked
// file of dir, at most limit bytes, and opens it (Open): the snapshot then
// reads that private file, which nobody else can change, and Close
// releases it.
func Receive(src io.Reader, dir string, key Key, owner string, limit int64) (*Snapshot, error) {
	f, err := os.CreateTemp(dir, ".snapshot-*")
	if err != nil {
		return nil, fmt.Errorf("receiving a snapshot: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("receiving a snapshot: %w", err)
	}
	n, err := io.Copy(f, io.LimitReader(src, limit+1))
	if err == nil && n > limit {
		err = fmt.Errorf("%w of %d bytes", ErrTooLarge, limit)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("receiving a snapshot: %w", err)
	}
	s, err := Open(f, n, key, owner, limit)
	if err != nil {
		f.Close()
		return nil, err
	}
	s.closer = f
	return s, nil
}
