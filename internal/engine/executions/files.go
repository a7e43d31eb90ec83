package executions

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/store"
)

// Inlining of small images in FileInfo.Content.
const (
	maxInlineImage = 64 << 10
	maxInlineTotal = 256 << 10
)

// saveFiles stores what the jail collected and returns the listing for the
// record. A file that cannot be stored is left out of the listing (and
// logged): the listing names only files that can be downloaded.
func (e *Service) saveFiles(ctx context.Context, id string, files []sandbox.CollectedFile) []run.FileInfo {
	if e.deps.Artifacts == nil || len(files) == 0 {
		return nil
	}
	out := make([]run.FileInfo, 0, len(files))
	inlined := 0
	for _, f := range files {
		mime := mimeOf(f.Path, f.Data)
		a, err := e.deps.Artifacts.PutArtifact(ctx, id, f.Path, mime, f.Data)
		if err != nil {
			e.log.Warn("storing an execution file", "execution_id", id, "path", f.Path, "err", err)
			continue
		}
		info := run.FileInfo{Path: a.Path, Size: a.Size, SHA256: a.SHA256, MIME: a.MIME}
		if strings.HasPrefix(mime, "image/") && len(f.Data) <= maxInlineImage && inlined+len(f.Data) <= maxInlineTotal {
			info.Content = base64.StdEncoding.EncodeToString(f.Data)
			inlined += len(f.Data)
		}
		out = append(out, info)
	}
	return out
}

// OpenFile opens one file an execution produced, by its workspace-relative
// path as listed. Only listed files are served: the path is compared with
// the listing, never resolved on a filesystem. run.ErrFileNotFound when
// x has no such file.
func (e *Service) OpenFile(ctx context.Context, x *Record, unsafePath string) (io.ReadCloser, run.FileInfo, error) {
	id := x.ID
	want := path.Clean(strings.TrimPrefix(unsafePath, "/"))
	for _, f := range x.Files {
		if f.Path != want {
			continue
		}
		if e.deps.Artifacts == nil {
			return nil, run.FileInfo{}, fmt.Errorf("%w: %s (this server stores no files)", run.ErrFileNotFound, f.Path)
		}
		r, _, err := e.deps.Artifacts.GetArtifact(ctx, id, f.Path)
		if errors.Is(err, store.ErrNotFound) {
			return nil, run.FileInfo{}, fmt.Errorf("%w: %s (expired)", run.ErrFileNotFound, f.Path)
		}
		if err != nil {
			return nil, run.FileInfo{}, fmt.Errorf("engine: opening %s of %s: %w", f.Path, id, err)
		}
		f.Content = ""
		return r, f, nil
	}
	return nil, run.FileInfo{}, fmt.Errorf("%w: %s", run.ErrFileNotFound, want)
}

// mimeOf names the type of common data files by their extension and
// sniffs the content of others.
func mimeOf(name string, data []byte) string {
	switch strings.ToLower(path.Ext(name)) {
	case ".csv":
		return "text/csv"
	case ".tsv":
		return "text/tab-separated-values"
	case ".txt", ".log":
		return "text/plain; charset=utf-8"
	case ".md":
		return "text/markdown"
	case ".json":
		return "application/json"
	case ".html", ".htm":
		return "text/html; charset=utf-8"
	case ".png":
		return "image/png"
	case ".jpg", ".jpeg":
		return "image/jpeg"
	case ".gif":
		return "image/gif"
	case ".svg":
		return "image/svg+xml"
	case ".pdf":
		return "application/pdf"
	case ".parquet":
		return "application/vnd.apache.parquet"
	case ".xlsx":
		return "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
	}
	return http.DetectContentType(data)
}
