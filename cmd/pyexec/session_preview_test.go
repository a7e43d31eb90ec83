package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSessionPreview: the command asks the server to share the port and
// prints the URL made absolute against --server; --revoke revokes; a
// malformed port is refused before any request.
func TestSessionPreview(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		switch r.Method {
		case http.MethodPost:
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"url":"/preview/abc/","session_id":"ses_1","port":8501,"expires_at":"2026-01-01T00:00:00Z","isolation":"sandbox"}`))
		case http.MethodDelete:
			_, _ = w.Write([]byte(`{"revoked":2}`))
		}
	}))
	defer srv.Close()
	code, stdout, stderr := runCLI("--server", srv.URL, "session", "preview", "ses_1", "8501")
	if code != 0 || strings.TrimSpace(stdout) != srv.URL+"/preview/abc/" {
		t.Errorf("preview: %d %q %q", code, stdout, stderr)
	}
	// A user and password in --server are not printed with the URL.
	withUser := strings.Replace(srv.URL, "http://", "http://user:secret@", 1)
	code, stdout, stderr = runCLI("--server", withUser, "session", "preview", "ses_1", "8501")
	if code != 0 || strings.TrimSpace(stdout) != srv.URL+"/preview/abc/" {
		t.Errorf("preview with user:password@ in --server: %d %q %q", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI("--server", srv.URL, "session", "preview", "--revoke", "ses_1", "8501")
	if code != 0 || !strings.Contains(stdout, "revoked 2") {
		t.Errorf("revoke: %d %q %q", code, stdout, stderr)
	}
	for _, port := range []string{"08501", "+80", "0", "65536", "80abc"} {
		if code, _, stderr := runCLI("--server", srv.URL, "session", "preview", "ses_1", port); code == 0 || !strings.Contains(stderr, "invalid port") {
			t.Errorf("port %q: %d %q", port, code, stderr)
		}
	}
	want := []string{"POST /api/v1/sessions/ses_1/ports/8501/share", "POST /api/v1/sessions/ses_1/ports/8501/share", "DELETE /api/v1/sessions/ses_1/ports/8501/share"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("requests %q, want %q", got, want)
	}
}
