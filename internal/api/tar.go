package api

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/pyexec/pyexec/internal/engine"
)

// archiveLimits cap what an uploaded tar may contain.
type archiveLimits struct {
	MaxFiles      int   // regular files
	MaxFileBytes  int64 // one file
	MaxTotalBytes int64 // all files together
	// MaxTarBytes caps a gzip-compressed tar once expanded: no more than
	// an uncompressed tar could be (the request body cap).
	MaxTarBytes int64
}

// gzipMagic starts every gzip stream (RFC 1952).
var gzipMagic = []byte{0x1f, 0x8b}

// errExpanded ends the reading of a gzip-compressed tar that expands
// beyond archiveLimits.MaxTarBytes.
var errExpanded = errors.New("expanded beyond the limit")

// readTar parses a USTAR, PAX or GNU tar into memory, uncompressed or
// gzip-compressed (told by its magic bytes, as python-executor's Docker
// upload accepted it); the expanded stream is capped like an uncompressed
// upload, so a gzip bomb is a 413, and the archive limits apply to what
// it holds. It accepts regular files and directories only (a directory
// entry is skipped unread: directories are made for the files): links
// (symbolic and hard), devices, FIFOs, absolute paths and ".." components
// are refused with a 400 naming the entry, and the limits give a 413, all
// before anything could be written anywhere: the result is only returned
// once the whole archive is known to be acceptable.
func readTar(r io.Reader, lim archiveLimits) ([]engine.File, error) {
	br := bufio.NewReader(r)
	var src io.Reader = br
	if magic, _ := br.Peek(len(gzipMagic)); bytes.Equal(magic, gzipMagic) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "malformed gzip-compressed tar: %v", err)
		}
		zr.Multistream(false)
		src = &cappedReader{r: zr, max: lim.MaxTarBytes}
	}
	tr := tar.NewReader(src)
	seen := newFileSet()
	var files []engine.File
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, tarError(err, lim, "malformed tar: %v", err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue // PAX global defaults; they carry no file
		}
		what := quoted("tar entry", hdr.Name)
		if err := entryTypeAllowed(hdr.Typeflag, what); err != nil {
			return nil, err
		}
		if hdr.Typeflag == tar.TypeDir {
			// Directories are made for the files in them, so an entry of
			// its own ("./" from `tar -C dir .`, say) is never written.
			continue
		}
		name, err := cleanPath(hdr.Name, what)
		if err != nil {
			return nil, err
		}
		if len(files) == lim.MaxFiles {
			return nil, errorf(http.StatusRequestEntityTooLarge, "archive has more than %d files", lim.MaxFiles)
		}
		if hdr.Size > lim.MaxFileBytes {
			return nil, errorf(http.StatusRequestEntityTooLarge, "%s is %d bytes; the limit is %d bytes per file", what, hdr.Size, lim.MaxFileBytes)
		}
		if total += hdr.Size; total > lim.MaxTotalBytes {
			return nil, errorf(http.StatusRequestEntityTooLarge, "archive contents exceed limit of %d bytes", lim.MaxTotalBytes)
		}
		if err := seen.add(name, what); err != nil {
			return nil, err
		}
		data := make([]byte, hdr.Size)
		if _, err := io.ReadFull(tr, data); err != nil {
			return nil, tarError(err, lim, "malformed tar: reading %s: %v", what, err)
		}
		files = append(files, engine.File{Path: name, Data: data, Mode: uint32(hdr.Mode) & 0o755})
	}
	if len(files) == 0 {
		return nil, errorf(http.StatusBadRequest, "the tar archive contains no files")
	}
	return files, nil
}

// tarError is the response to err from reading the archive: a 413 when
// a compressed archive expanded too far, else a 400 with the message.
func tarError(err error, lim archiveLimits, format string, args ...any) error {
	if errors.Is(err, errExpanded) {
		return errorf(http.StatusRequestEntityTooLarge, "the gzip-compressed tar expands to more than %d bytes, the limit of an uncompressed upload", lim.MaxTarBytes)
	}
	return errorf(http.StatusBadRequest, format, args...)
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

// entryTypeAllowed refuses every tar entry type but regular files and
// directories. PAX and GNU long-name headers never get here: archive/tar
// folds them into the entry they describe (and old-style regular files
// into TypeReg).
func entryTypeAllowed(typ byte, what string) error {
	var reason string
	switch typ {
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
		reason = fmt.Sprintf("entry type %q is not allowed", typ)
	}
	return errorf(http.StatusBadRequest, "%s: %s", what, reason)
}
