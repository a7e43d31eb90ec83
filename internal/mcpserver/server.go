// Package mcpserver exposes pyexec to AI agents as Model Context Protocol
// tools, with the official MCP Go SDK. The same tools are served over stdio
// (`pyexec mcp`) and over streamable HTTP (/mcp on `pyexec serve`), and
// their definitions feed the OpenAI- and Anthropic-style tool schemas of
// GET /api/v1/tools.
//
// The server reaches pyexec only through Backend, which the Go client
// implements: `pyexec mcp --server` talks to a remote server, `--local` to
// a private in-process one, and /mcp to the API it is mounted on, all on
// one code path. Nothing here runs code or knows about the engine.
//
// Every tool that is registered works: a tool is added to the catalogue
// (tools in catalog.go) together with its handler, in a file of its own,
// once the API behind it exists.
package mcpserver

import (
	"context"
	"iter"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/client"
)

// implementationName is how the server introduces itself to MCP clients.
const implementationName = "pyexec"

// killTimeout bounds the kill of a run whose tool call was canceled.
const killTimeout = 10 * time.Second

// instructions tell a model what the server is for, once per session.
const instructions = "pyexec runs Python code in an isolated Linux sandbox with time and memory limits. " +
	"Call run_python to execute code and see its stdout, stderr and exit status, its plots as images and the " +
	"files it wrote (read them with read_file); lint_python checks code without running it. Each call starts " +
	"from an empty working directory, unless it passes a session_id from create_session: a session keeps " +
	"variables, imports and files between calls until close_session; snapshot_session saves it for later " +
	"(create_session with from_snapshot restores it) and fork_session copies it. The network is off unless the server " +
	"allows it and the call asks for it."

// Backend is what the tools need from pyexec: the asynchronous execution
// API and its live events. *client.Client implements it.
type Backend interface {
	// ExecuteAsync uploads a project (an uncompressed tar) and queues its
	// execution, returning the execution ID.
	ExecuteAsync(ctx context.Context, tarData []byte, metadata *client.Metadata) (string, error)
	// Follow streams an execution's events until its final status.
	Follow(ctx context.Context, executionID string) iter.Seq2[client.Event, error]
	// GetExecution returns the current record of an execution.
	GetExecution(ctx context.Context, executionID string) (*client.ExecutionResult, error)
	// Kill stops an execution and returns its status afterwards.
	Kill(ctx context.Context, executionID string) (client.ExecutionStatus, error)
	LintBackend
	FilesBackend
}

var _ Backend = (*client.Client)(nil)

// Options configure a server.
type Options struct {
	// Version is reported to clients in the initialize handshake.
	Version string
	// Logger receives the server's own warnings; nil discards them.
	Logger *slog.Logger
	// Done, when closed, ends every tool call in flight; their runs are
	// killed. The HTTP API closes it when it shuts down. May be nil.
	Done <-chan struct{}
	// Lint, if set, tells whether the backend can lint; a server made
	// while it says false does not offer lint_python. Nil: it can.
	Lint func() bool
	// Preview, if set, tells whether the server behind the backend shares
	// preview URLs (--preview); preview_session_port is offered only when
	// it says so. Nil: it does not.
	Preview func() bool
}

func (o Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

// New returns an MCP server whose tools drive b. Run it on a transport
// (mcp.StdioTransport for `pyexec mcp`) or serve it with NewHTTPHandler.
func New(b Backend, opts Options) *mcp.Server { return newServer(b, opts, nil) }

// newServer is New with the session id the server hands out (nil: the
// SDK's random one).
func newServer(b Backend, opts Options, sessionID func() string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: implementationName, Title: "pyexec Python sandbox", Version: opts.Version},
		&mcp.ServerOptions{
			Instructions: instructions,
			// Tools only: no logging capability, which the SDK would
			// otherwise advertise by default.
			Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
			GetSessionID: sessionID,
		})
	h := &handlers{backend: b, log: opts.logger(), done: opts.Done}
	lint := opts.Lint == nil || opts.Lint()
	preview := opts.Preview != nil && opts.Preview()
	for _, t := range h.tools() {
		if !offered(t.def.Name, lint, preview) {
			continue
		}
		t.add(s, t.def)
	}
	return s
}

// handlers hold what the tool handlers share.
type handlers struct {
	backend Backend
	log     *slog.Logger
	done    <-chan struct{}
}

// bound returns ctx, also canceled when the server's Done channel closes.
func (h *handlers) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	if h.done == nil {
		return ctx, cancel
	}
	stop := make(chan struct{})
	go func() {
		select {
		case <-h.done:
			cancel()
		case <-stop:
		}
	}()
	return ctx, func() {
		close(stop)
		cancel()
	}
}
