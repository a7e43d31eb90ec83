package mcpserver

import (
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionIdleTimeout closes HTTP sessions that have sent nothing for this
// long, so that clients that vanish do not hold memory forever.
const sessionIdleTimeout = 30 * time.Minute

// HTTPOptions configure NewHTTPHandler.
type HTTPOptions struct {
	Options
	// AnyHost turns off the SDK's DNS-rebinding protection, which refuses
	// requests that arrive on a loopback address with a non-loopback Host
	// header (as from a reverse proxy on the same machine). It is safe only
	// when every request must carry an API key, which a page in a browser
	// rebinding a name cannot supply.
	AnyHost bool
}

// NewHTTPHandler serves the MCP tools over streamable HTTP. Each MCP
// session gets its own server, driving the backend that backendFor returns
// for the request that opened the session, and belongs to the caller that
// callerOf names for that request: a later request for the session from
// any other caller (or with an unknown session id) is refused with 404.
// Authentication is the caller's job: wrap the handler, and have callerOf
// read who it authenticated. A request whose caller is "" cannot open a
// session.
func NewHTTPHandler(callerOf func(*http.Request) string, backendFor func(*http.Request) Backend, opts HTTPOptions) http.Handler {
	owners := newSessionOwners()
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		caller := callerOf(r)
		if caller == "" {
			return nil // the SDK answers 400 "no server available"
		}
		id := newSessionID()
		srv := newServer(backendFor(r), opts.Options, func() string { return id })
		owners.bind(id, caller, srv)
		return srv
	}, &mcp.StreamableHTTPOptions{
		Logger:                     opts.Options.Logger,
		SessionTimeout:             sessionIdleTimeout,
		DisableLocalhostProtection: opts.AnyHost,
	})
	return owners.guard(h, callerOf)
}
