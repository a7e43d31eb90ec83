package api

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"slices"

	"github.com/pyexec/pyexec/internal/engine"
)

// Workspace files travel as raw bytes (one file) or as a tar (a folder),
// so they are plain handlers on the mux, behind the same authentication,
// as session files are:
//
//	GET    /api/v1/workspaces/{name}/files/{path...}   one file (?version=N: of a kept version)
//	PUT    /api/v1/workspaces/{name}/files/{path...}   write one file: a new version
//	DELETE /api/v1/workspaces/{name}/files/{path...}   delete a file or folder: a new version
//	GET    /api/v1/workspaces/{name}/archive           a tar of the folder ?dir= (all: none)
//	POST   /api/v1/workspaces/{name}/archive           unpack a tar (gzip accepted) into ?dir=: a new version
//
// ?owner= names another key's workspace (operator keys only).
//
// Paths go through the same hygiene as uploads: the workspace refuses
// absolute paths, "..", links, devices and FIFOs, and sizes are held to the
// request body cap and the quota before anything is kept.

// workspaceFileRoutes are the routes served outside the OpenAPI document,
// for the tests that must cover every route (tenancy).
var workspaceFileRoutes = []string{
	"GET /api/v1/workspaces/{name}/files/{path...}",
	"PUT /api/v1/workspaces/{name}/files/{path...}",
	"DELETE /api/v1/workspaces/{name}/files/{path...}",
	"GET /api/v1/workspaces/{name}/archive",
	"POST /api/v1/workspaces/{name}/archive",
}

func (s *Server) registerWorkspaceFiles(mux *http.ServeMux, we WorkspaceEngine) {
	ref := func(r *http.Request) engine.WorkspaceRef {
		return engine.WorkspaceRef{Owner: r.URL.Query().Get("owner"), Name: r.PathValue("name")}
	}
	fail := func(w http.ResponseWriter, err error) {
		var e *Error
		if !errors.As(err, &e) {
			err = engineError(s.log, err)
		}
		writeAPIError(w, err)
	}
	filePath := func(w http.ResponseWriter, r *http.Request) (string, bool) {
		if r.PathValue("path") == "" && r.Method != http.MethodGet {
			// …/files itself: only GET (the listing) is a route there.
			w.Header().Set("Allow", "GET")
			writeAPIError(w, errorf(http.StatusMethodNotAllowed, "%s is not allowed on a workspace's files: name a file after /files/", r.Method))
			return "", false
		}
		p, err := cleanPath(r.PathValue("path"), quoted("file", r.PathValue("path")))
		if err != nil {
			writeAPIError(w, err)
			return "", false
		}
		return p, true
	}
	committed := func(w http.ResponseWriter, c engine.WorkspaceCommit) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_ = json.NewEncoder(w).Encode(c)
	}
	handle := func(pattern string, h http.HandlerFunc) {
		if !slices.Contains(workspaceFileRoutes, pattern) {
			panic("api: a workspace file route missing from workspaceFileRoutes: " + pattern)
		}
		mux.HandleFunc(pattern, h)
	}
	handle("GET /api/v1/workspaces/{name}/files/{path...}", func(w http.ResponseWriter, r *http.Request) {
		p, ok := filePath(w, r)
		if !ok {
			return
		}
		n, err := workspaceVersion(r)
		if err != nil {
			fail(w, err)
			return
		}
		f, info, err := we.OpenWorkspaceFile(r.Context(), callerFrom(r.Context()).engine(), ref(r), n, p)
		if err != nil {
			fail(w, err)
			return
		}
		defer f.Close()
		attachmentHeaders(w, p)
		if info.SHA256 != "" {
			w.Header().Set("ETag", `"`+info.SHA256+`"`)
		}
		_, _ = io.Copy(w, f)
	})
	handle("PUT /api/v1/workspaces/{name}/files/{path...}", func(w http.ResponseWriter, r *http.Request) {
		p, ok := filePath(w, r)
		if !ok {
			return
		}
		body := http.MaxBytesReader(w, r.Body, s.limits.MaxBodyBytes)
		c, err := we.WriteWorkspaceFile(r.Context(), callerFrom(r.Context()).engine(), ref(r), p, body, 0o644, s.limits.MaxBodyBytes)
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				fail(w, errorf(http.StatusRequestEntityTooLarge, "file larger than %d bytes", tooBig.Limit))
				return
			}
			fail(w, err)
			return
		}
		committed(w, c)
	})
	handle("DELETE /api/v1/workspaces/{name}/files/{path...}", func(w http.ResponseWriter, r *http.Request) {
		p, ok := filePath(w, r)
		if !ok {
			return
		}
		c, err := we.RemoveWorkspaceFile(r.Context(), callerFrom(r.Context()).engine(), ref(r), p)
		if err != nil {
			fail(w, err)
			return
		}
		committed(w, c)
	})
	handle("GET /api/v1/workspaces/{name}/archive", func(w http.ResponseWriter, r *http.Request) {
		n, err := workspaceVersion(r)
		if err != nil {
			fail(w, err)
			return
		}
		c := callerFrom(r.Context()).engine()
		// The workspace is found before the answer starts, so that an
		// unknown one is a 404 and not a broken tar.
		if _, err := we.Workspace(r.Context(), c, ref(r)); err != nil {
			fail(w, err)
			return
		}
		name := r.PathValue("name") + ".tar"
		w.Header().Set("Content-Type", "application/x-tar")
		w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
		tw := &startedWriter{w: w}
		if err := we.TarWorkspace(r.Context(), c, ref(r), n, r.URL.Query().Get("dir"), tw); err != nil {
			if !tw.started {
				w.Header().Del("Content-Disposition")
				fail(w, err)
				return
			}
			s.log.Warn("writing a workspace's tar", "workspace", r.PathValue("name"), "err", err)
		}
	})
	handle("POST /api/v1/workspaces/{name}/archive", func(w http.ResponseWriter, r *http.Request) {
		body := http.MaxBytesReader(w, r.Body, s.limits.MaxBodyBytes)
		a := s.limits.Archive
		c, err := we.UploadWorkspace(r.Context(), callerFrom(r.Context()).engine(), ref(r), r.URL.Query().Get("dir"), body,
			engine.WorkspaceLimits{MaxFiles: a.MaxFiles, MaxFileBytes: a.MaxFileBytes, MaxTotalBytes: a.MaxTotalBytes, MaxTarBytes: a.MaxTarBytes})
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				fail(w, errorf(http.StatusRequestEntityTooLarge, "%s", bodyTooLarge(tooBig.Limit)))
				return
			}
			fail(w, err)
			return
		}
		committed(w, c)
	})
}

// startedWriter notes whether anything was written, so that an error
// before the first byte can still be an error response.
type startedWriter struct {
	w       io.Writer
	started bool
}

func (s *startedWriter) Write(p []byte) (int, error) {
	s.started = s.started || len(p) > 0
	return s.w.Write(p)
}
