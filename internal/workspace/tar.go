package workspace

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"
)

// UploadLimits cap what one upload may hold, as the API's archive limits
// cap the uploads of executions.
type UploadLimits struct {
	MaxFiles      int   // regular files
	MaxFileBytes  int64 // one file
	MaxTotalBytes int64 // all files together
	// MaxTarBytes caps a gzip-compressed tar once expanded.
	MaxTarBytes int64
}

var gzipMagic = []byte{0x1f, 0x8b}

// Upload unpacks a tar (or gzip-compressed tar, told by its magic bytes)
// into the folder dir ("" for the top) and commits it as one version. It
// holds the rules of uploads: regular files and directories only — links,
// devices and FIFOs are refused, as are absolute paths, ".." and
// duplicates — and the limits; nothing is committed unless the whole
// archive is acceptable. Files stream into the blob cache, never into
// memory. Existing files at the same paths are replaced; nothing else is
// removed.
func (m *Manager) Upload(ctx context.Context, c Caller, ref Ref, dir string, r io.Reader, lim UploadLimits) (Commit, error) {
	d, err := cleanDir(dir)
	if err != nil {
		return Commit{}, err
	}
	rec, key, base, err := m.head(ctx, c, ref)
	if err != nil {
		return Commit{}, err
	}
	defer m.writing()()
	room, what, err := m.roomFor(ctx, rec, base)
	if err != nil {
		return Commit{}, err
	}
	// Each file is held to the room left by its header's size before a
	// byte of it is staged; staged files become blobs only once the whole
	// archive is accepted.
	fits := func(p string, size int64) error {
		if old, ok := base[join(d, p)]; ok && old.Kind == kindFile {
			room += old.Size
		}
		if room -= size; room < 0 {
			return fmt.Errorf("%w: the archive does not fit: with tar entry %s it is %d bytes over %s", ErrQuota, quoted(p), -room, what)
		}
		return nil
	}
	entries, stagedFiles, err := m.readTar(r, lim, saltOf(rec.Owner), fits)
	defer func() {
		for _, s := range stagedFiles {
			s.drop()
		}
	}()
	if err != nil {
		return Commit{}, err
	}
	changes := map[string]*entry{}
	if d != "" {
		if err := putWithParents(base, changes, entry{Path: d, Kind: kindDir, Mode: 0o755}); err != nil {
			return Commit{}, err
		}
	}
	for _, e := range entries {
		e.Path = join(d, e.Path)
		if err := putWithParents(base, changes, e); err != nil {
			return Commit{}, err
		}
	}
	if err := m.fitsBefore(ctx, rec, base, changes); err != nil {
		return Commit{}, err
	}
	next := stagedFiles
	for _, e := range entries {
		if e.Kind == kindFile {
			if err := m.cache.placeStaged(next[0], attrs{Mode: e.Mode, MTime: e.MTime}); err != nil {
				return Commit{}, err
			}
			next = next[1:]
		}
	}
	return m.commitPlaced(ctx, key, rec.ID, changeSet{base: rec.Head, changes: changes, source: "upload"})
}

// readTar reads an archive into entries, staging file contents: held
// has the bytes of its files, in order. fits is asked about
// each file's path and size before its bytes are read. The caller drops
// what is staged, also on error.
func (m *Manager) readTar(r io.Reader, lim UploadLimits, salt []byte, fits func(p string, size int64) error) (out []entry, held []staged, err error) {
	br := bufio.NewReader(r)
	var src io.Reader = br
	if magic, _ := br.Peek(len(gzipMagic)); bytes.Equal(magic, gzipMagic) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return out, held, fmt.Errorf("%w: malformed gzip-compressed tar: %v", ErrInvalid, err)
		}
		zr.Multistream(false)
		src = &cappedReader{r: zr, max: lim.MaxTarBytes}
	}
	tr := tar.NewReader(src)
	seen := map[string]string{} // path → kind
	var files int
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return out, held, tarError(err, lim)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		if err := entryAllowed(hdr); err != nil {
			return out, held, err
		}
		if d, err := cleanDir(hdr.Name); hdr.Typeflag == tar.TypeDir && err == nil && d == "" {
			continue // "./", the archive's top
		}
		p, err := cleanPath(hdr.Name)
		if err != nil {
			return out, held, err
		}
		e := entry{Path: p, Kind: kindDir, Mode: uploadMode(fs.FileMode(hdr.Mode))}
		if hdr.Typeflag == tar.TypeDir {
			if err := addSeen(seen, e); err != nil {
				return out, held, err
			}
			out = append(out, e)
			continue
		}
		if files++; files > lim.MaxFiles {
			return out, held, fmt.Errorf("%w: the archive has more than %d files", ErrLimit, lim.MaxFiles)
		}
		if hdr.Size > lim.MaxFileBytes {
			return out, held, fmt.Errorf("%w: tar entry %s is %d bytes; the limit is %d bytes per file", ErrLimit, quoted(p), hdr.Size, lim.MaxFileBytes)
		}
		if total += hdr.Size; total > lim.MaxTotalBytes {
			return out, held, fmt.Errorf("%w: the archive's files exceed %d bytes", ErrLimit, lim.MaxTotalBytes)
		}
		e.Kind, e.MTime = kindFile, hdr.ModTime.UnixNano()
		if hdr.ModTime.IsZero() {
			e.MTime = m.now().UnixNano()
		}
		if err := addSeen(seen, e); err != nil {
			return out, held, err
		}
		if err := fits(p, hdr.Size); err != nil {
			return out, held, err
		}
		s, err := m.cache.stage(tr, hdr.Size, salt)
		if err != nil {
			return out, held, tarError(err, lim)
		}
		held = append(held, s)
		if e.Hash, e.Size = s.hash, s.size; e.Size != hdr.Size {
			return out, held, fmt.Errorf("%w: malformed tar: %s is shorter than its header says", ErrInvalid, quoted(p))
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return out, held, fmt.Errorf("%w: the tar archive holds no files", ErrInvalid)
	}
	return out, held, nil
}

// addSeen records a path of the archive, refusing a duplicate and a path
// that is a file in one place and a directory in another (every parent of
// a path seen is recorded as a directory). A directory named twice is no
// harm.
func addSeen(seen map[string]string, e entry) error {
	switch k, ok := seen[e.Path]; {
	case ok && k == kindDir && e.Kind != kindDir:
		return fmt.Errorf("%w: tar entry %s: is also used as a directory", ErrInvalid, quoted(e.Path))
	case ok && (k != kindDir || e.Kind != kindDir):
		return fmt.Errorf("%w: tar entry %s: duplicate name", ErrInvalid, quoted(e.Path))
	}
	var bad string
	parentDirs(e.Path, func(d string) {
		if k, ok := seen[d]; ok && k != kindDir && bad == "" {
			bad = d
		}
		seen[d] = kindDir
	})
	if bad != "" {
		return fmt.Errorf("%w: tar entry %s: %s is a file, not a directory", ErrInvalid, quoted(e.Path), quoted(bad))
	}
	seen[e.Path] = e.Kind
	return nil
}

// entryAllowed refuses every tar entry type but regular files and
// directories, naming the entry.
func entryAllowed(hdr *tar.Header) error {
	var reason string
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeDir:
		return nil
	case tar.TypeSymlink:
		reason = "symbolic links are not allowed"
	case tar.TypeLink:
		reason = "hard links are not allowed"
	case tar.TypeChar, tar.TypeBlock:
		reason = "device files are not allowed"
	case tar.TypeFifo:
		reason = "named pipes are not allowed"
	default:
		reason = fmt.Sprintf("entry type %q is not allowed", hdr.Typeflag)
	}
	return fmt.Errorf("%w: tar entry %s: %s", ErrInvalid, quoted(hdr.Name), reason)
}

var errExpanded = errors.New("expanded beyond the limit")

func tarError(err error, lim UploadLimits) error {
	if errors.Is(err, errExpanded) {
		return fmt.Errorf("%w: the gzip-compressed tar expands to more than %d bytes", ErrLimit, lim.MaxTarBytes)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, tar.ErrHeader) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) {
		return fmt.Errorf("%w: malformed tar: %v", ErrInvalid, err)
	}
	return err
}

// cappedReader fails with errExpanded once more than max bytes were read.
type cappedReader struct {
	r      io.Reader
	n, max int64
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.n > c.max {
		return 0, errExpanded
	}
	if room := c.max + 1 - c.n; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := c.r.Read(p)
	if c.n += int64(n); c.n > c.max {
		return n, errExpanded
	}
	return n, err
}

// Tar writes the folder dir ("" for all) of version n as a tar to w, its
// paths relative to the folder. Links are written as links (they point
// inside the workspace).
func (m *Manager) Tar(ctx context.Context, c Caller, ref Ref, n int64, dir string, w io.Writer) error {
	d, err := cleanDir(dir)
	if err != nil {
		return err
	}
	rec, _, man, err := m.at(ctx, c, ref, n)
	if err != nil {
		return err
	}
	if e, ok := man[d]; d != "" && (!ok || e.Kind != kindDir) {
		return fmt.Errorf("%w: directory %s", ErrNotFound, quoted(d))
	}
	tw := tar.NewWriter(w)
	for _, p := range man.under(d) {
		if err := m.tarEntry(ctx, tw, man[p], rec.Owner, strings.TrimPrefix(strings.TrimPrefix(p, d), "/")); err != nil {
			return err
		}
	}
	return tw.Close()
}

func (m *Manager) tarEntry(ctx context.Context, tw *tar.Writer, e entry, owner, name string) error {
	hdr := &tar.Header{Name: name, Mode: int64(e.Mode), Format: tar.FormatPAX}
	switch e.Kind {
	case kindDir:
		hdr.Typeflag, hdr.Name = tar.TypeDir, name+"/"
	case kindLink:
		hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, e.Target, 0o777
	case kindFile:
		hdr.Typeflag, hdr.Size, hdr.ModTime = tar.TypeReg, e.Size, time.Unix(0, e.MTime)
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("writing tar entry %s: %w", quoted(e.Path), err)
	}
	if e.Kind != kindFile {
		return nil
	}
	f, err := m.openBlob(ctx, e, owner)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.Copy(tw, f); err != nil {
		return fmt.Errorf("writing tar entry %s: %w", quoted(e.Path), err)
	}
	return nil
}
