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
// for the request that opened the session. Authentication, if any, is the
// caller's job: wrap the handler.
func NewHTTPHandler(backendFor func(*http.Request) Backend, opts HTTPOptions) http.Handler {
	return mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		return New(backendFor(r), opts.Options)
	}, &mcp.StreamableHTTPOptions{
		Logger:                     opts.Options.Logger,
		SessionTimeout:             sessionIdleTimeout,
		DisableLocalhostProtection: opts.AnyHost,
	})
}
