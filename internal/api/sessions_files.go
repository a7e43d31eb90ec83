package api

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"path"
)

// Session files travel as raw bytes, so they are plain handlers on the
// mux (behind the same authentication) rather than JSON operations.

func (s *Server) registerSessionFiles(mux *http.ServeMux, se SessionEngine) {
	mux.HandleFunc("PUT /api/v1/sessions/{id}/files/{path...}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("path") == "" { // the listing, which is only read
			w.Header().Set("Allow", http.MethodGet)
			writeError(w, errorf(http.StatusMethodNotAllowed, "method %s not allowed on %s", r.Method, r.URL.Path))
			return
		}
		p, err := cleanPath(r.PathValue("path"), quoted("file", r.PathValue("path")))
		if err != nil {
			writeAPIError(w, err)
			return
		}
		body := http.MaxBytesReader(w, r.Body, s.limits.MaxBodyBytes)
		data, err := io.ReadAll(body)
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeError(w, errorf(http.StatusRequestEntityTooLarge, "file larger than %d bytes", tooBig.Limit))
				return
			}
			writeError(w, errorf(http.StatusBadRequest, "reading the file: %v", err))
			return
		}
		if err := se.PutSessionFile(r.Context(), r.PathValue("id"), callerFrom(r.Context()).engine(), p, data); err != nil {
			writeAPIError(w, sessionError(s, err))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"path": p, "size": len(data)})
	})
	mux.HandleFunc("GET /api/v1/sessions/{id}/files/{path...}", func(w http.ResponseWriter, r *http.Request) {
		p, err := cleanPath(r.PathValue("path"), quoted("file", r.PathValue("path")))
		if err != nil {
			writeAPIError(w, err)
			return
		}
		data, err := se.ReadSessionFile(r.Context(), r.PathValue("id"), callerFrom(r.Context()).engine(), p)
		if err != nil {
			writeAPIError(w, sessionError(s, err))
			return
		}
		attachmentHeaders(w, p)
		_, _ = w.Write(data)
	})
}

// writeAPIError writes err, an *Error from this package, as the response.
func writeAPIError(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = errorf(http.StatusInternalServerError, "internal error")
	}
	writeError(w, e)
}

// attachmentHeaders are the headers of a file downloaded by its path p:
// its type told by its extension, never sniffed, as an attachment.
func attachmentHeaders(w http.ResponseWriter, p string) {
	ct := mime.TypeByExtension(path.Ext(p))
	if ct == "" {
		ct = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}))
}
