package mcpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestSessionOwnersGuard(t *testing.T) {
	o := newSessionOwners()
	o.bind("s1", "a", mcp.NewServer(&mcp.Implementation{Name: "t"}, nil))
	passed := false
	h := o.guard(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { passed = true }),
		func(r *http.Request) string { return r.Header.Get("X-Caller") })
	tests := []struct {
		name, session, caller string
		pass                  bool
	}{
		{"owner", "s1", "a", true},
		{"another caller", "s1", "b", false},
		{"no caller", "s1", "", false},
		{"unknown session", "s2", "a", false},
		{"no session (initialize)", "", "b", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			passed = false
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			r.Header.Set("X-Caller", tt.caller)
			if tt.session != "" {
				r.Header.Set(sessionIDHeader, tt.session)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if passed != tt.pass {
				t.Fatalf("passed = %v, want %v", passed, tt.pass)
			}
			if !tt.pass && (w.Code != http.StatusNotFound || w.Header().Get("Content-Type") != "application/json") {
				t.Errorf("refusal = %d %s %s", w.Code, w.Header().Get("Content-Type"), w.Body)
			}
		})
	}
}

func TestSessionOwnersForgetClosedSessions(t *testing.T) {
	o := newSessionOwners()
	closed := mcp.NewServer(&mcp.Implementation{Name: "t"}, nil)
	live := mcp.NewServer(&mcp.Implementation{Name: "t"}, nil)
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := live.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	o.bind("closed", "a", closed)
	o.bind("live", "a", live)
	o.bind("young", "a", mcp.NewServer(&mcp.Implementation{Name: "t"}, nil))
	for _, id := range []string{"closed", "live"} {
		o.sessions[id].created = time.Now().Add(-2 * pruneAfter)
	}
	o.bind("new", "b", closed)
	for id, want := range map[string]bool{"closed": false, "live": true, "young": true, "new": true} {
		if _, ok := o.ownerOf(id); ok != want {
			t.Errorf("session %s bound = %v, want %v", id, ok, want)
		}
	}
}
