package api

import (
	"context"
	"net/http"

	"github.com/pyexec/pyexec/client"
	"github.com/pyexec/pyexec/internal/mcpserver"
)

// mcpPath is where the MCP server is served (streamable HTTP).
const mcpPath = "/mcp"

// mcpBaseURL is the base URL of the in-process client of an MCP session:
// the origin the MCP client reached. Requests never leave the process, so
// it only makes a preview URL on the API's origin (a path in the share's
// answer) absolute, for the one who asked: a URL it can open.
func mcpBaseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	host := r.Host
	if host == "" {
		host = "pyexec.in-process" // only a label: nothing is dialled
	}
	return scheme + "://" + host
}

// mcpHandler serves the MCP tools at /mcp. A session's tools call this
// API in process through the Go client, as the caller who opened the
// session (the auth middleware has checked their key on the way in), so
// they see exactly what the HTTP API does. An MCP session belongs to the
// API key that opened it; mcpserver refuses it to any other. api is the
// API's routes without the auth middleware.
func (s *Server) mcpHandler(api http.Handler) http.Handler {
	callerOf := func(r *http.Request) string { return callerFrom(r.Context()).Name }
	h := mcpserver.NewHTTPHandler(callerOf, func(r *http.Request) mcpserver.Backend {
		hc := &http.Client{Transport: &inProcess{handler: api, caller: callerFrom(r.Context())}}
		return client.New(mcpBaseURL(r), client.WithHTTPClient(hc), client.WithTimeout(0))
	}, mcpserver.HTTPOptions{
		Options: mcpserver.Options{
			Version: s.info.Version,
			Logger:  s.log.With("component", "mcp"),
			Done:    s.streams.Done(),
			Lint:    s.lintAvailable,
			Preview: s.previewsOn,
		},
		// With API keys, a rebinding page cannot call the server anyway,
		// and a reverse proxy on this host must be able to.
		AnyHost: s.info.AuthRequired,
	})
	// MCP clients hold a stream open for the whole session; end it when
	// the server shuts down, as the event streams are, rather than making
	// shutdown wait for its timeout.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(s.streams, cancel)()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}
