package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
)

// healthBody answers GET /health: {"status":"ok"} plus facts an operator
// checks first.
type healthBody struct {
	Status            string       `json:"status" example:"ok"`
	Version           string       `json:"version"`
	Isolation         string       `json:"isolation" doc:"How payloads are isolated"`
	UnsafeNoIsolation bool         `json:"unsafe_no_isolation" doc:"True when the server runs code without the jail"`
	AuthRequired      bool         `json:"auth_required"`
	NetworkAllowed    bool         `json:"network_allowed" doc:"Whether requests may ask for network access"`
	PythonVersions    []string     `json:"python_versions,omitempty" doc:"Interpreter versions a request may ask for, oldest first"`
	DefaultPython     string       `json:"default_python,omitempty" doc:"The version used when a request names none"`
	MaxTimeoutSeconds int          `json:"max_timeout_seconds" doc:"The longest timeout a request may ask for"`
	Sessions          bool         `json:"sessions" doc:"Whether the server offers sessions (/api/v1/sessions)"`
	BaseEnvironment   string       `json:"base_environment,omitempty" doc:"The base dependency environment: building, ready, failed: <why>, or none; requests never wait for it"`
	Store             *storeHealth `json:"store,omitempty" doc:"How full the shared store is"`
}

// storeHealth is the store part of /health.
type storeHealth struct {
	State     string `json:"state" enum:"ok,near_limit,full" doc:"near_limit from 90% of max_bytes (the oldest finished executions are being evicted); full: above it with only unfinished executions left"`
	UsedBytes int64  `json:"used_bytes"`
	MaxBytes  int64  `json:"max_bytes" doc:"--store-max-bytes; 0: no limit"`
	Evictions uint64 `json:"evictions" doc:"Finished executions evicted since the server started"`
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
	huma.Register(hapi, o, func(context.Context, *struct{}) (*healthOutput, error) {
		body := s.info
		if s.baseEnv != nil {
			body.BaseEnvironment = s.baseEnv()
		}
		if s.store != nil {
			st := s.store()
			body.Store = &storeHealth{State: st.State, UsedBytes: st.UsedBytes, MaxBytes: st.MaxBytes, Evictions: st.Evictions}
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
		st := s.eng.Stats()
		return &readyOutput{Body: readyBody{Status: "ready", Running: st.Running, Queued: st.Queued, Capacity: st.Capacity}}, nil
	})
}
