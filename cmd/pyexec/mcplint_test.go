//go:build linux

package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/pyexec/pyexec/client"
)

// TestServerLints: `pyexec mcp --server` offers lint_python unless the
// server says lint is unavailable.
func TestServerLints(t *testing.T) {
	tests := []struct {
		name, health string
		want         bool
	}{
		{"unavailable", `{"status":"ok","tools":{"installer":"pip","lint":"unavailable"}}`, false},
		{"starting", `{"status":"ok","tools":{"installer":"uv","lint":"starting"}}`, true},
		{"a server that does not say", `{"status":"ok"}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(tt.health))
			}))
			defer srv.Close()
			if got := serverLints(context.Background(), client.New(srv.URL)); got != tt.want {
				t.Errorf("serverLints = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestServerPreviews: `pyexec mcp --server` offers preview_session_port
// only when the server says it previews; silence, or no answer, is no.
func TestServerPreviews(t *testing.T) {
	for _, tt := range []struct {
		name, health string
		want         bool
	}{
		{"on", `{"status":"ok","previews":true}`, true},
		{"off", `{"status":"ok","previews":false}`, false},
		{"a server that does not say", `{"status":"ok"}`, false},
		{"no answer", ``, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if tt.health == "" {
					w.WriteHeader(http.StatusInternalServerError)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(tt.health))
			}))
			defer srv.Close()
			if got := serverPreviews(context.Background(), client.New(srv.URL)); got != tt.want {
				t.Errorf("serverPreviews = %v, want %v", got, tt.want)
			}
		})
	}
}
