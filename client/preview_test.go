package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSharePortURLHasNoCredentials: a preview URL on the API's origin is
// made absolute against the base URL, without the user and password the
// base URL may carry (the URL is made to be handed on).
func TestSharePortURLHasNoCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"url":"/preview/tok/","session_id":"ses_a","port":8000,"expires_at":"2026-01-02T03:04:05Z","isolation":"sandbox"}`))
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, base := range []string{"http://user:secret@" + host, srv.URL} {
		s, err := New(base).ShareSessionPort(context.Background(), "ses_a", 8000)
		if err != nil {
			t.Fatal(err)
		}
		if s.URL != srv.URL+"/preview/tok/" {
			t.Errorf("base %s: URL %q, want %q", base, s.URL, srv.URL+"/preview/tok/")
		}
	}
}
