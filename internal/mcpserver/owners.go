package mcpserver

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An MCP session over HTTP belongs to the caller that opened it: its tools
// act as that caller, so a request carrying its Mcp-Session-Id with any
// other caller's credentials must not reach it. The SDK's own binding needs
// its bearer-token middleware; ours works with every way the API
// authenticates (Bearer, X-API-Key, anonymous on a server without keys).

// sessionIDHeader carries the MCP session id of streamable HTTP.
const sessionIDHeader = "Mcp-Session-Id"

// msgSessionNotFound answers a session id that is unknown or another
// caller's, alike, so that the answer does not tell which.
const msgSessionNotFound = "MCP session not found for this API key; start a new session (initialize without Mcp-Session-Id)"

// pruneAfter is how long a bound session may go without a live SDK session
// before its binding is dropped: long enough for the initialize request
// that created it to connect.
const pruneAfter = time.Minute

// sessionOwners maps the id of every live MCP session to its owner.
type sessionOwners struct {
	mu       sync.Mutex
	sessions map[string]*boundSession
}

// boundSession is one MCP session: who opened it, and the server that
// serves it (which has a live session until the SDK closes it).
type boundSession struct {
	owner   string
	server  *mcp.Server
	created time.Time
}

func newSessionOwners() *sessionOwners {
	return &sessionOwners{sessions: make(map[string]*boundSession)}
}

// bind records that the session id, served by srv, belongs to owner, and
// forgets the sessions the SDK has closed meanwhile.
func (o *sessionOwners) bind(id, owner string, srv *mcp.Server) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, b := range o.sessions {
		if time.Since(b.created) > pruneAfter && !hasSession(b.server) {
			delete(o.sessions, k)
		}
	}
	o.sessions[id] = &boundSession{owner: owner, server: srv, created: time.Now()}
}

// ownerOf returns the owner of session id; false when it is unknown.
func (o *sessionOwners) ownerOf(id string) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	b, ok := o.sessions[id]
	if !ok {
		return "", false
	}
	return b.owner, true
}

func hasSession(srv *mcp.Server) bool {
	for range srv.Sessions() {
		return true
	}
	return false
}

// guard refuses, with 404, a request for a session that is not its
// caller's (or that this handler never opened); other requests pass.
func (o *sessionOwners) guard(next http.Handler, callerOf func(*http.Request) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get(sessionIDHeader); id != "" {
			owner, ok := o.ownerOf(id)
			if !ok || owner == "" || owner != callerOf(r) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusNotFound)
				_ = json.NewEncoder(w).Encode(map[string]string{"error": msgSessionNotFound})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// newSessionID is a fresh, unguessable session id.
func newSessionID() string { return rand.Text() }
