package client

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// archiveEpoch is the modification time (Unix seconds) of entries that have
// none of their own (TarFromMap, TarFromReader), so the same input always
// gives the same bytes.
const archiveEpoch = 0

// skippedDir reports whether TarFromDirectory leaves out a directory of
// this name: version control data and bytecode caches, which the server has
// no use for.
func skippedDir(name string) bool {
	switch name {
	case ".git", ".hg", ".svn", "__pycache__":
		return true
	}
	return false
}

// tarBuilder writes an uncompressed tar (USTAR, or PAX for long names) of
// regular files only, refusing names that would escape the workspace and
// names given twice.
type tarBuilder struct {
	buf  bytes.Buffer
	tw   *tar.Writer
	seen map[string]bool
}

func newTarBuilder() *tarBuilder {
	b := &tarBuilder{seen: make(map[string]bool)}
	b.tw = tar.NewWriter(&b.buf)
	return b
}

// add writes one regular file of size bytes read from r.
func (b *tarBuilder) add(name string, mode int64, mtime time.Time, size int64, r io.Reader) error {
	clean, err := cleanName(name)
	if err != nil {
		return err
	}
	if b.seen[clean] {
		return fmt.Errorf("%q is in the archive twice", clean)
	}
	b.seen[clean] = true
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     clean,
		Mode:     mode,
		Size:     size,
		ModTime:  mtime.Truncate(time.Second),
	}
	if err := b.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("adding %s: %w", clean, err)
	}
	if _, err := io.CopyN(b.tw, r, size); err != nil {
		return fmt.Errorf("adding %s: %w", clean, err)
	}
	return nil
}

// addFile adds the regular file at p under name.
func (b *tarBuilder) addFile(name, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", p)
	}
	mode := int64(0o644)
	if fi.Mode()&0o111 != 0 {
		mode = 0o755
	}
	return b.add(name, mode, fi.ModTime(), fi.Size(), f)
}

func (b *tarBuilder) bytes() ([]byte, error) {
	if err := b.tw.Close(); err != nil {
		return nil, fmt.Errorf("closing archive: %w", err)
	}
	return b.buf.Bytes(), nil
}

// cleanName turns name into a clean relative slash path, refusing empty
// names, absolute paths and ".." components.
func cleanName(name string) (string, error) {
	n := strings.ReplaceAll(name, "\\", "/")
	if n == "" || path.IsAbs(n) || filepath.IsAbs(name) {
		return "", fmt.Errorf("%w: %q", ErrUnsafePath, name)
	}
	n = path.Clean(n)
	if n == "." || n == ".." || strings.HasPrefix(n, "../") {
		return "", fmt.Errorf("%w: %q", ErrUnsafePath, name)
	}
	return n, nil
}

// TarFromMap returns a tar archive of files, which maps names (such as
// "main.py" or "pkg/util.py") to contents. Entries are sorted by name.
func TarFromMap(files map[string]string) ([]byte, error) {
	b := newTarBuilder()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		content := files[name]
		if err := b.add(name, 0o644, time.Unix(archiveEpoch, 0), int64(len(content)), strings.NewReader(content)); err != nil {
			return nil, err
		}
	}
	return b.bytes()
}

// TarFromFiles returns a tar archive of the files at the given paths, each stored
// under its base name (so "src/main.py" becomes "main.py"). Two files with
// the same base name are an error.
func TarFromFiles(files []string) ([]byte, error) {
	b := newTarBuilder()
	for _, p := range files {
		if err := b.addFile(filepath.Base(p), p); err != nil {
			return nil, fmt.Errorf("adding %s: %w", p, err)
		}
	}
	return b.bytes()
}

// TarFromDirectory returns a tar archive of the regular files below dirPath,
// named by their path relative to dirPath, in lexical order. Version control
// directories and __pycache__ are left out. A symbolic link or special file
// is an error rather than being silently dropped: the server refuses links,
// so resolve them before uploading.
func TarFromDirectory(dirPath string) ([]byte, error) {
	b := newTarBuilder()
	err := filepath.WalkDir(dirPath, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dirPath && skippedDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: only regular files can be uploaded (found %s)", p, d.Type())
		}
		rel, err := filepath.Rel(dirPath, p)
		if err != nil {
			return err
		}
		return b.addFile(filepath.ToSlash(rel), p)
	})
	if err != nil {
		return nil, fmt.Errorf("archiving %s: %w", dirPath, err)
	}
	return b.bytes()
}

// TarFromReader returns a tar archive holding one file, filename, whose
// content is everything read from r (for example os.Stdin).
func TarFromReader(r io.Reader, filename string) ([]byte, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", filename, err)
	}
	b := newTarBuilder()
	if err := b.add(filename, 0o644, time.Unix(archiveEpoch, 0), int64(len(data)), bytes.NewReader(data)); err != nil {
		return nil, err
	}
	return b.bytes()
}

// DetectEntrypoint chooses the file to run in a tar archive: main.py, else
// __main__.py, else the first .py file in archive order; it returns
// ErrNoEntrypoint when the archive holds no Python file.
func DetectEntrypoint(tarData []byte) (string, error) {
	var names []string
	tr := tar.NewReader(bytes.NewReader(tarData))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("reading archive: %w", err)
		}
		if hdr.Typeflag == tar.TypeReg {
			names = append(names, strings.TrimPrefix(hdr.Name, "./"))
		}
	}
	return entrypointOf(names)
}

// entrypointOf applies DetectEntrypoint's order to a list of file names.
func entrypointOf(names []string) (string, error) {
	for _, want := range []string{"main.py", "__main__.py"} {
		if slices.Contains(names, want) {
			return want, nil
		}
	}
	for _, n := range names {
		if strings.HasSuffix(n, ".py") {
			return n, nil
		}
	}
	return "", ErrNoEntrypoint
}
