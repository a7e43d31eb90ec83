package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
)

// healthBody answers GET /health: {"status":"ok"} plus facts an operator
// checks first.
type healthBody struct {
	Status            string            `json:"status" example:"ok"`
	Version           string            `json:"version"`
	Isolation         string            `json:"isolation" doc:"How payloads are isolated"`
	UnsafeNoIsolation bool              `json:"unsafe_no_isolation" doc:"True when the server runs code without the jail"`
	AuthRequired      bool              `json:"auth_required"`
	NetworkAllowed    bool              `json:"network_allowed" doc:"Whether requests may ask for network access"`
	PythonVersions    []string          `json:"python_versions,omitempty" doc:"Interpreter versions a request may ask for, oldest first"`
	DefaultPython     string            `json:"default_python,omitempty" doc:"The version used when a request names none"`
	MaxTimeoutSeconds int               `json:"max_timeout_seconds" doc:"The longest timeout a request may ask for"`
	Sessions          bool              `json:"sessions" doc:"Whether the server offers sessions (/api/v1/sessions)"`
	Previews          bool              `json:"previews" doc:"Whether the server proxies to web apps of sessions and shares preview URLs (--preview)"`
	BaseEnvironment   string            `json:"base_environment,omitempty" doc:"The base dependency environment: building, ready, failed: <why>, or none; requests never wait for it"`
	Tools             *ToolsHealth      `json:"tools,omitempty" doc:"The helper programs: uv builds environments, ruff lints"`
	Store             *storeHealth      `json:"store,omitempty" doc:"How full the shared store is"`
	Workspaces        *workspacesHealth `json:"workspaces,omitempty" doc:"This server's workspaces (absent when they are disabled)"`
	Node              string            `json:"node,omitempty" doc:"This server's name in the fleet (--node-name); left out when the server has API keys"`
	NATS              *NATSHealth       `json:"nats,omitempty" doc:"The store's NATS connection"`
}

// NATSHealth is the NATS part of /health.
type NATSHealth struct {
	Mode      string `json:"mode" enum:"embedded,cluster" doc:"embedded: the in-process server (the default); cluster: an external JetStream cluster (--nats)"`
	Connected bool   `json:"connected" doc:"false while the connection to the cluster is lost and being retried"`
	Server    string `json:"server,omitempty" doc:"The cluster server connected to (credentials left out); left out when the server has API keys"`
}

// storeHealth is the store part of /health.
type storeHealth struct {
	State     string `json:"state" enum:"ok,near_limit,full" doc:"near_limit from 90% of max_bytes (the oldest finished executions are being evicted); full: above it with only unfinished executions left"`
	UsedBytes int64  `json:"used_bytes"`
	MaxBytes  int64  `json:"max_bytes" doc:"--store-max-bytes; 0: no limit"`
	Evictions uint64 `json:"evictions" doc:"Finished executions evicted since the server started"`
}

// workspacesHealth is the workspaces part of /health, which anyone may
// read: whether they work, and no count (how many, bytes, mounts are on
// /metrics, behind a key), since counts of every key's workspaces would
// tell one key about the others.
type workspacesHealth struct {
	State string `json:"state" enum:"ok,error"`
	Error string `json:"error,omitempty" doc:"Why they could not be measured, or why this server's jails cannot mount them"`
}

// workspacesHealthTimeout bounds the measurement of the workspaces.
const workspacesHealthTimeout = 2 * time.Second

// ToolsHealth is the tools part of /health.
type ToolsHealth struct {
	UV        ToolHealth `json:"uv"`
	Ruff      ToolHealth `json:"ruff"`
	Installer string     `json:"installer" doc:"What builds environments: uv; pip when uv is unavailable (slower builds); uv (pending) until the first build has uv"`
	Lint      string     `json:"lint" enum:"ready,starting,unavailable" doc:"starting: ruff is being fetched, lint answers 503 until it is there"`
}

// ToolHealth is one helper program.
type ToolHealth struct {
	State   string `json:"state" enum:"ready,provisioning,absent,off" doc:"provisioning: being fetched from the package index; absent: neither configured, fetched nor on PATH"`
	Source  string `json:"source,omitempty" enum:"flag,provisioned,path" doc:"flag: --uv/--ruff; provisioned: the pinned version fetched into DATA_DIR/tools; path: found on PATH"`
	Version string `json:"version,omitempty" doc:"The pinned version, when provisioned"`
	Path    string `json:"path,omitempty"`
	Detail  string `json:"detail,omitempty" doc:"Why it is absent, or what it falls back to"`
}

// lintAvailable reports whether lint can work now or soon.
func (s *Server) lintAvailable() bool { return s.tools == nil || s.tools().Lint != "unavailable" }

// previewsOn reports whether the preview routes work (--preview, with
// sessions): the MCP server offers preview_session_port only then.
func (s *Server) previewsOn() bool {
	return s.previews != nil && s.previews.enabled && s.previews.eng != nil
}

type healthOutput struct{ Body healthBody }

// readyBody answers GET /readyz while the server takes work.
type readyBody struct {
	Status   string `json:"status" example:"ready"`
	Running  int    `json:"running" doc:"Executions running now"`
	Queued   int    `json:"queued" doc:"Executions waiting for a slot"`
	Capacity int    `json:"capacity" doc:"Executions that may run at once"`
}

type readyOutput struct{ Body readyBody }

func (s *Server) registerHealth(hapi huma.API) {
	o := op(hapi, "health", http.MethodGet, "/health", "Liveness: the process is up", http.StatusInternalServerError)
	o.Security = nil
	o.Tags = []string{"service"}
	huma.Register(hapi, o, func(ctx context.Context, _ *struct{}) (*healthOutput, error) {
		body := s.info
		body.Previews = s.previewsOn()
		if s.baseEnv != nil {
			body.BaseEnvironment = s.baseEnv()
		}
		if s.tools != nil {
			t := s.tools()
			body.Tools = &t
		}
		if s.nats != nil {
			n := s.nats()
			if body.AuthRequired {
				n.Server = "" // as for the node's name, see New
			}
			body.NATS = &n
		}
		if s.store != nil {
			st := s.store()
			body.Store = &storeHealth{State: st.State, UsedBytes: st.UsedBytes, MaxBytes: st.MaxBytes, Evictions: st.Evictions}
		}
		if s.wsUsage != nil {
			wctx, cancel := context.WithTimeout(ctx, workspacesHealthTimeout)
			_, err := s.wsUsage(wctx)
			cancel()
			body.Workspaces = &workspacesHealth{State: "ok"}
			if err != nil {
				body.Workspaces.State, body.Workspaces.Error = "error", err.Error()
			}
		}
		return &healthOutput{Body: body}, nil
	})

	o = op(hapi, "ready", http.MethodGet, "/readyz", "Readiness: the server accepts executions", http.StatusServiceUnavailable)
	o.Security = nil
	o.Tags = []string{"service"}
	huma.Register(hapi, o, func(context.Context, *struct{}) (*readyOutput, error) {
		if !s.ready.Load() {
			return nil, errorf(http.StatusServiceUnavailable, "server is shutting down")
		}
		// A node that lost its store cannot record what it runs: a load
		// balancer should send the work elsewhere until the link is back.
		if s.nats != nil {
			if n := s.nats(); !n.Connected {
				return nil, errorf(http.StatusServiceUnavailable, "the store is unreachable: the %s NATS connection is lost and being retried", n.Mode)
			}
		}
		st := s.eng.Stats()
		return &readyOutput{Body: readyBody{Status: "ready", Running: st.Running, Queued: st.Queued, Capacity: st.Capacity}}, nil
	})
}
