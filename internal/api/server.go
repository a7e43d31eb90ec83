// Package api is pyexec's HTTP API: the python-executor-compatible
// endpoints (/health, /api/v1/exec/sync|async, /api/v1/executions/{id},
// /api/v1/eval) plus listing, live events, tool definitions, the MCP
// server (/mcp), readiness, metrics, the OpenAPI 3.1 document, an
// offline docs UI and the web playground at /. Handlers decode, call the Engine and encode; they hold
// no business logic, and nothing here runs code, touches the disk or knows
// how executions are stored. Its Prometheus instrumentation is a package of
// its own (internal/api/metrics).
//
// The handlers are kept as one package because they are one API: each is
// a method on the one Server and registers on its one huma API, and they
// share what makes the endpoints behave alike — the authenticated caller,
// the error renderer that turns the engine's sentinels into status codes
// and python-executor's {"error": ...} body (errors.go), the upload and
// body limits (request.go) and the wire types whose schema names the
// OpenAPI document, its golden files and the clients depend on. Split by
// endpoint, that plumbing would have to be exported to every piece and the
// one OpenAPI registry would become several.
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pyexec/pyexec/internal/api/metrics"
	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/preview"
)

// Defaults for the Options a caller may leave zero.
const (
	defaultHeartbeat       = 15 * time.Second
	defaultShutdownTimeout = 30 * time.Second
	// bodyReadTimeout bounds reading an upload, so that a slow client
	// cannot hold a connection forever.
	bodyReadTimeout = 2 * time.Minute
)

// Options configure a Server.
type Options struct {
	Config    config.Config // validated serve configuration
	Version   string        // reported by /health and the OpenAPI document
	Isolation string        // isolation mode reported by /health, e.g. "jail"
	Logger    *slog.Logger  // nil discards
	// BaseEnvironment, if set, reports the state of the base dependency
	// environment on /health ("building", "ready", "failed: why"...).
	BaseEnvironment func() string
	// Tools, if set, reports uv, ruff and lint on /health; when it says
	// lint is unavailable, lint_python is neither an MCP tool nor in
	// /api/v1/tools.
	Tools func() ToolsHealth
	// Store, if set, reports how full the shared store is on /health.
	Store func() engine.StoreStats
	// Workspaces, if set, measures this node's workspaces for /health
	// (serve sets it when workspaces are enabled).
	Workspaces func(context.Context) (engine.WorkspaceStats, error)
	// Node names this server in a fleet on /health; NATS, if set,
	// reports the store's connection there.
	Node string
	NATS func() NATSHealth
	// PythonVersions and DefaultPython are the interpreters /health lists
	// (the playground's picker offers them).
	PythonVersions []string
	DefaultPython  string

	// Heartbeat is the interval of SSE keep-alive comments (default 15s).
	Heartbeat time.Duration
	// ShutdownTimeout is how long Serve waits for requests in flight once
	// its context ends (default 30s).
	ShutdownTimeout time.Duration
	// Collectors are further Prometheus metrics served on /metrics (the
	// warm pool's, say).
	Collectors []prometheus.Collector
	// Sessions, if set, serves the sessions endpoints instead of the
	// engine (a fleet's router, which reaches sessions on other nodes).
	Sessions SessionEngine
	// PreviewFleet, if set, relays previews of sessions other nodes of
	// the fleet hold to them (a fleet's router).
	PreviewFleet PreviewFleet
}

// Server is the HTTP API over an Engine.
type Server struct {
	eng       Engine
	log       *slog.Logger
	limits    limits
	info      healthBody
	baseEnv   func() string
	tools     func() ToolsHealth
	store     func() engine.StoreStats
	wsUsage   func(context.Context) (engine.WorkspaceStats, error)
	nats      func() NATSHealth
	heartbeat time.Duration
	shutdown  time.Duration
	metrics   *metrics.Metrics
	handler   http.Handler
	ready     atomic.Bool
	followers *followerLimits // open event streams (followers.go)
	previews  *previews       // nil without sessions (preview.go)

	// streams is canceled when Serve shuts down, ending event streams that
	// would otherwise keep the server open until the timeout.
	streams     context.Context
	stopStreams context.CancelFunc
}

// New builds the API over eng. It fails if the configured API keys do not
// parse (run Config.Validate first).
func New(eng Engine, opts Options) (*Server, error) {
	cfg := opts.Config
	keys, err := cfg.Keys()
	if err != nil {
		return nil, fmt.Errorf("api keys: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		eng: eng,
		log: log,
		limits: limits{
			MaxTimeout:     cfg.MaxTimeout,
			MaxMemoryMB:    cfg.MaxMemoryMB,
			MaxDiskMB:      cfg.MaxDiskMB,
			AllowNetwork:   cfg.AllowNetwork,
			NetworkDefault: cfg.Network.Default,
			MaxBodyBytes:   cfg.MaxBodyBytes(),
			Archive: archiveLimits{
				MaxFiles:      cfg.MaxArchiveFiles,
				MaxFileBytes:  cfg.MaxArchiveFileBytes,
				MaxTotalBytes: cfg.MaxArchiveBytes,
				MaxTarBytes:   cfg.MaxBodyBytes(),
			},
		},
		info: healthBody{
			Status:            "ok",
			Version:           opts.Version,
			Isolation:         opts.Isolation,
			UnsafeNoIsolation: cfg.UnsafeNoIsolation,
			AuthRequired:      len(keys) > 0,
			NetworkAllowed:    cfg.AllowNetwork,
			PythonVersions:    opts.PythonVersions,
			DefaultPython:     opts.DefaultPython,
			MaxTimeoutSeconds: int(cfg.MaxTimeout / time.Second),
		},
		baseEnv:   opts.BaseEnvironment,
		tools:     opts.Tools,
		store:     opts.Store,
		wsUsage:   opts.Workspaces,
		nats:      opts.NATS,
		heartbeat: opts.Heartbeat,
		shutdown:  opts.ShutdownTimeout,
		metrics:   metrics.New(eng.Stats),
		followers: newFollowerLimits(cfg.Followers.PerExecution, cfg.Followers.PerKey),
	}
	if len(keys) == 0 {
		// Anyone may read /health: with keys, the host names stay behind
		// them (/api/v1/nodes).
		s.info.Node = opts.Node
	}
	if err := s.metrics.Register(opts.Collectors...); err != nil {
		return nil, err
	}
	if s.heartbeat <= 0 {
		s.heartbeat = defaultHeartbeat
	}
	if s.shutdown <= 0 {
		s.shutdown = defaultShutdownTimeout
	}
	s.streams, s.stopStreams = context.WithCancel(context.Background())
	s.ready.Store(true)

	mux := http.NewServeMux()
	hapi := humago.New(mux, s.humaConfig(opts.Version))
	hapi.UseMiddleware(validationAs400, emptyTypedQuery(hapi))
	s.registerHealth(hapi)
	s.registerExec(hapi)
	s.registerEval(hapi)
	s.registerExecutions(hapi)
	s.registerEvents(hapi)
	s.registerLint(hapi)
	s.registerTools(hapi)
	s.registerFiles(hapi)
	if ne, ok := eng.(NodesEngine); ok {
		s.registerNodes(hapi, ne)
	}
	se, ok := eng.(SessionEngine)
	if opts.Sessions != nil {
		se, ok = opts.Sessions, true
	}
	if ok {
		s.info.Sessions = true
		s.registerSessions(hapi, mux, se)
		if err := s.registerPreviews(hapi, mux, eng, cfg, opts.PreviewFleet); err != nil {
			return nil, err
		}
	}
	if we, ok := eng.(WorkspaceEngine); ok {
		s.registerWorkspaces(hapi, mux, we)
	}
	looseBodies(hapi.OpenAPI().Components.Schemas)
	registerDocs(mux)
	frameSrc := ""
	if s.previews != nil && s.previews.enabled {
		frameSrc = s.previews.origin.FrameSource()
	}
	registerPlayground(mux, frameSrc)
	// MCP (streamable HTTP), behind the same auth as the API; see mcp.go.
	mux.Handle(mcpPath, s.mcpHandler(mux))
	mux.Handle("GET /metrics", s.metrics.Handler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if allow := allowedMethods(mux, r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, errorf(http.StatusMethodNotAllowed, "method %s not allowed on %s", r.Method, r.URL.Path))
			return
		}
		writeError(w, errorf(http.StatusNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path))
	})

	s.handler = s.metrics.Instrument(mux, cleanAccept(newAuthenticator(keys, cfg.Admins()).middleware(mux)))
	if s.previews != nil && s.previews.origin.Isolation() != preview.Sandboxed {
		s.handler = s.previews.onPreviewHost(s.handler)
	}
	return s, nil
}

// allowedMethods lists the methods other routes of mux serve at r's path,
// for the 405 of a method none serves (the catch-all pattern "/" would
// otherwise answer it 404).
func allowedMethods(mux *http.ServeMux, r *http.Request) []string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/" && !redirectsTo(pattern, r.URL.Path) {
			allow = append(allow, m)
		}
	}
	return allow
}

// redirectsTo reports whether pattern ends in a {name...} wildcard whose
// parent is path itself: the mux only redirects such a path (to path/), it
// serves nothing there.
func redirectsTo(pattern, path string) bool {
	if !strings.HasSuffix(pattern, "...}") {
		return false
	}
	_, patternPath, _ := strings.Cut(pattern, " ")
	parent := patternPath[:strings.LastIndex(patternPath, "/{")]
	return strings.Count(parent, "/") == strings.Count(strings.TrimSuffix(path, "/"), "/") && !strings.HasSuffix(path, "/")
}

// humaConfig is huma's default configuration minus what this API does
// differently: no $schema links in bodies, no CDN docs page (docs.go
// serves an embedded one), no schema routes, and errors as {"error": ...}.
func (s *Server) humaConfig(version string) huma.Config {
	hc := huma.DefaultConfig("pyexec", version)
	hc.CreateHooks = nil
	hc.DocsPath = ""
	hc.SchemasPath = ""
	hc.Info.Description = "Runs untrusted Python in a Linux jail. Wire-compatible with python-executor; " +
		"errors are {\"error\": \"message\"}. When the server has API keys, send Authorization: Bearer <key> or X-API-Key."
	hc.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"bearer": {Type: "http", Scheme: "bearer"},
		"apiKey": {Type: "apiKey", In: "header", Name: "X-API-Key"},
	}
	hc.Transformers = append(hc.Transformers, humaErrors(s.limits.MaxBodyBytes))
	return hc
}

// Handler is the complete HTTP handler: routes, auth and metrics.
func (s *Server) Handler() http.Handler { return s.handler }

// Metrics are the server's Prometheus metrics. Finished executions are
// counted by Metrics().ObserveExecution, which the caller must feed from
// the engine (the engine has no completion hook yet; see the api branch
// notes).
func (s *Server) Metrics() *metrics.Metrics { return s.metrics }

// SetReady sets what /readyz reports; Serve clears it when shutting down.
func (s *Server) SetReady(ready bool) { s.ready.Store(ready) }

// Serve serves on ln until ctx ends, then shuts down gracefully: /readyz
// turns 503, event streams end, and requests in flight get ShutdownTimeout
// to finish before their connections are closed.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(s.stopStreams)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	s.SetReady(false)
	sctx, cancel := context.WithTimeout(context.Background(), s.shutdown)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		s.log.Warn("requests still running at shutdown timeout; closing their connections", "timeout", s.shutdown)
		err = srv.Close()
	}
	if serveErr := <-errc; !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("http server: %w", serveErr)
	}
	if err != nil {
		return fmt.Errorf("shutting down http server: %w", err)
	}
	return nil
}

// op is the skeleton of an operation: its identity and its documented
// error responses.
func op(hapi huma.API, id, method, path, summary string, errs ...int) huma.Operation {
	return huma.Operation{
		OperationID: id,
		Method:      method,
		Path:        path,
		Summary:     summary,
		Responses:   errorResponses(hapi.OpenAPI().Components.Schemas, errs...),
		Security:    []map[string][]string{{"bearer": {}}, {"apiKey": {}}},
	}
}
