package api

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pyexec/pyexec/internal/engine"
)

// Paths of the file endpoints. The mux pattern of a download ends in a
// wildcard that takes the rest of the path (file paths contain slashes);
// the OpenAPI document names that parameter the way OpenAPI can.
const (
	filesPath        = "/api/v1/executions/{id}/files"
	fileMuxPath      = filesPath + "/{path...}"
	fileDocumentPath = filesPath + "/{path}"
)

// FileList answers GET /api/v1/executions/{id}/files.
type FileList struct {
	ExecutionID string     `json:"execution_id"`
	Files       []FileInfo `json:"files" doc:"Without content: download a file for its bytes"`
}

type fileListOutput struct{ Body FileList }

type fileInput struct {
	ID          string `path:"id" doc:"Execution id"`
	Path        string `path:"path" maxLength:"4096" doc:"The file's path as listed, slashes included (out/report.csv)" example:"out/report.csv"`
	IfNoneMatch string `header:"If-None-Match" doc:"An ETag from an earlier download: 304 when the file is the same"`
}

func (s *Server) registerFiles(hapi huma.API) {
	o := op(hapi, "list-execution-files", http.MethodGet, filesPath, "List the files an execution produced",
		http.StatusUnauthorized, http.StatusNotFound, http.StatusInternalServerError)
	o.Tags = []string{"files"}
	huma.Register(hapi, o, func(ctx context.Context, in *idInput) (*fileListOutput, error) {
		files, err := s.eng.ListFiles(ctx, callerFrom(ctx).engine(), in.ID)
		if err != nil {
			return nil, engineError(s.log, err)
		}
		out := &fileListOutput{Body: FileList{ExecutionID: in.ID, Files: newFiles(files)}}
		if out.Body.Files == nil {
			out.Body.Files = []FileInfo{}
		}
		for i := range out.Body.Files {
			out.Body.Files[i].Content = ""
		}
		return out, nil
	})

	o = op(hapi, "download-execution-file", http.MethodGet, fileMuxPath, "Download a file an execution produced",
		http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound, http.StatusInternalServerError)
	o.Tags = []string{"files"}
	o.Description = "The raw bytes, as an attachment, with the file's MIME type; the ETag is its SHA-256. " +
		"Only files in the execution's listing are served: the path is matched against it, never resolved on a filesystem."
	o.Responses["200"] = &huma.Response{
		Description: "The file's content",
		Headers: map[string]*huma.Header{
			"Content-Disposition": {Description: "attachment; filename=<base name>", Schema: &huma.Schema{Type: huma.TypeString}},
			"ETag":                {Description: "The quoted hex SHA-256 of the content", Schema: &huma.Schema{Type: huma.TypeString}},
		},
		Content: map[string]*huma.MediaType{"application/octet-stream": {Schema: &huma.Schema{Type: huma.TypeString, Format: "binary"}}},
	}
	o.Responses["304"] = &huma.Response{Description: "Not modified (If-None-Match matched the ETag)"}
	huma.Register(hapi, o, func(ctx context.Context, in *fileInput) (*huma.StreamResponse, error) {
		r, f, err := s.eng.OpenFile(ctx, callerFrom(ctx).engine(), in.ID, in.Path)
		if errors.Is(err, engine.ErrFileNotFound) {
			return nil, errorf(http.StatusNotFound, "file not found")
		}
		if err != nil {
			return nil, engineError(s.log, err)
		}
		return &huma.StreamResponse{Body: func(hctx huma.Context) {
			defer r.Close()
			s.sendFile(hctx, r, f, in.IfNoneMatch)
		}}, nil
	})
	// Document the operation under a path OpenAPI can template.
	paths := hapi.OpenAPI().Paths
	paths[fileDocumentPath] = paths[fileMuxPath]
	delete(paths, fileMuxPath)
}

// sendFile writes a downloaded file. The headers keep a browser from
// rendering what the untrusted code wrote as a page of this origin: it is
// an attachment, its type is not sniffed, and a sandbox CSP applies if it
// is opened anyway.
func (s *Server) sendFile(hctx huma.Context, r io.Reader, f engine.FileInfo, ifNoneMatch string) {
	etag := strconv.Quote(f.SHA256)
	hctx.SetHeader("ETag", etag)
	hctx.SetHeader("X-Content-Type-Options", "nosniff")
	hctx.SetHeader("Content-Security-Policy", "sandbox")
	if etagMatches(ifNoneMatch, etag) {
		hctx.SetStatus(http.StatusNotModified)
		return
	}
	ct := f.MIME
	if ct == "" {
		ct = "application/octet-stream"
	}
	hctx.SetHeader("Content-Type", ct)
	hctx.SetHeader("Content-Length", strconv.FormatInt(f.Size, 10))
	disposition := mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(f.Path)})
	if disposition == "" { // a name it cannot encode
		disposition = "attachment"
	}
	hctx.SetHeader("Content-Disposition", disposition)
	hctx.SetStatus(http.StatusOK)
	if n, err := io.Copy(hctx.BodyWriter(), r); err != nil {
		s.log.Warn("sending an execution file", "path", f.Path, "sent", n, "size", f.Size, "err", err)
	}
}

// etagMatches reports whether an If-None-Match header names etag (or is *).
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}
