package api

import (
	"archive/tar"
	"bufio"
	"bytes"
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
}

// readTar parses an uncompressed USTAR, PAX or GNU tar into memory. It
// accepts regular files and directories only (a directory entry is
// skipped unread: directories are made for the files): links (symbolic and hard),
// devices, FIFOs, absolute paths and ".." components are refused with a 400
// naming the entry, and the limits give a 413, all before anything could be
// written anywhere: the result is only returned once the whole archive is
// known to be acceptable. The file set holds the clean paths.
func readTar(r io.Reader, lim archiveLimits) ([]engine.File, *fileSet, error) {
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		return nil, nil, errorf(http.StatusBadRequest, "the tar part is gzip-compressed; send an uncompressed tar")
	}
	tr := tar.NewReader(br)
	seen := newFileSet()
	var files []engine.File
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, errorf(http.StatusBadRequest, "malformed tar: %v", err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue // PAX global defaults; they carry no file
		}
		what := quoted("tar entry", hdr.Name)
		if err := entryTypeAllowed(hdr.Typeflag, what); err != nil {
			return nil, nil, err
		}
		if hdr.Typeflag == tar.TypeDir {
			// Directories are made for the files in them, so an entry of
			// its own ("./" from `tar -C dir .`, say) is never written.
			continue
		}
		name, err := cleanPath(hdr.Name, what)
		if err != nil {
			return nil, nil, err
		}
		if len(files) == lim.MaxFiles {
			return nil, nil, errorf(http.StatusRequestEntityTooLarge, "archive has more than %d files", lim.MaxFiles)
		}
		if hdr.Size > lim.MaxFileBytes {
			return nil, nil, errorf(http.StatusRequestEntityTooLarge, "%s is %d bytes; the limit is %d bytes per file", what, hdr.Size, lim.MaxFileBytes)
		}
		if total += hdr.Size; total > lim.MaxTotalBytes {
			return nil, nil, errorf(http.StatusRequestEntityTooLarge, "archive contents exceed limit of %d bytes", lim.MaxTotalBytes)
		}
		if err := seen.add(name, what); err != nil {
			return nil, nil, err
		}
		data := make([]byte, hdr.Size)
		if _, err := io.ReadFull(tr, data); err != nil {
			return nil, nil, errorf(http.StatusBadRequest, "malformed tar: reading %s: %v", what, err)
		}
		files = append(files, engine.File{Path: name, Data: data, Mode: uint32(hdr.Mode) & 0o755})
	}
	if len(files) == 0 {
		return nil, nil, errorf(http.StatusBadRequest, "the tar archive contains no files")
	}
	return files, seen, nil
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
