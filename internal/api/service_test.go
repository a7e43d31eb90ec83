package api

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
)

func TestHealthAndReady(t *testing.T) {
	ts := newTestServer(t, newFakeEngine(), nil)
	for _, path := range []string{"/health", "/readyz"} {
		t.Run(strings.TrimPrefix(path, "/"), func(t *testing.T) {
			code, hdr, body := call(t, ts, http.MethodGet, path, "", nil, nil)
			checkGolden(t, goldenName(t), code, hdr, body)
		})
	}
	t.Run("unsafe mode is reported", func(t *testing.T) {
		ts := newTestServer(t, newFakeEngine(), func(c *config.Config) { c.UnsafeNoIsolation = true })
		_, _, body := call(t, ts, http.MethodGet, "/health", "", nil, nil)
		var h struct {
			Status string `json:"status"`
			Unsafe bool   `json:"unsafe_no_isolation"`
		}
		if err := json.Unmarshal(body, &h); err != nil || h.Status != "ok" || !h.Unsafe {
			t.Fatalf("health = %s (%v)", body, err)
		}
	})
	t.Run("base environment state is reported", func(t *testing.T) {
		s, err := New(newFakeEngine(), Options{Config: config.Default(), BaseEnvironment: func() string { return "building" }})
		if err != nil {
			t.Fatal(err)
		}
		rec := newRecorder()
		s.Handler().ServeHTTP(rec, mustRequest(t, http.MethodGet, "/health"))
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"base_environment":"building"`) {
			t.Fatalf("health = %d %s", rec.Code, rec.Body)
		}
	})
	t.Run("not ready while the store is unreachable", func(t *testing.T) {
		var connected atomic.Bool
		s, err := New(newFakeEngine(), Options{Config: config.Default(),
			NATS: func() NATSHealth { return NATSHealth{Mode: "cluster", Connected: connected.Load()} }})
		if err != nil {
			t.Fatal(err)
		}
		rec := newRecorder()
		s.Handler().ServeHTTP(rec, mustRequest(t, http.MethodGet, "/readyz"))
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "the store is unreachable") {
			t.Fatalf("readyz while disconnected = %d %s", rec.Code, rec.Body)
		}
		connected.Store(true)
		rec = newRecorder()
		s.Handler().ServeHTTP(rec, mustRequest(t, http.MethodGet, "/readyz"))
		if rec.Code != http.StatusOK {
			t.Fatalf("readyz once reconnected = %d %s", rec.Code, rec.Body)
		}
	})
	t.Run("not ready while shutting down", func(t *testing.T) {
		c := config.Default()
		s, err := New(newFakeEngine(), Options{Config: c})
		if err != nil {
			t.Fatal(err)
		}
		s.SetReady(false)
		rec := newRecorder()
		s.Handler().ServeHTTP(rec, mustRequest(t, http.MethodGet, "/readyz"))
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"error":"server is shutting down"`) {
			t.Fatalf("readyz = %d %s", rec.Code, rec.Body)
		}
	})
}

func TestOpenAPI(t *testing.T) {
	// The document only: the session routes are registered but not called.
	ts := newTestServer(t, struct {
		*fakeEngine
		SessionEngine
		SnapshotEngine
	}{fakeEngine: newFakeEngine()}, nil)
	code, _, body := call(t, ts, http.MethodGet, "/openapi.json", "", nil, nil)
	if code != 200 {
		t.Fatalf("status = %d", code)
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	want := map[string][]string{
		"/health": {"get"}, "/readyz": {"get"}, "/api/v1/exec/sync": {"post"}, "/api/v1/exec/async": {"post"},
		"/api/v1/eval": {"post"}, "/api/v1/executions": {"get"}, "/api/v1/executions/{id}": {"get", "delete"},
		"/api/v1/executions/{id}/events": {"get"}, "/api/v1/lint": {"post"},
	}
	for path, methods := range want {
		for _, m := range methods {
			if _, ok := doc.Paths[path][m]; !ok {
				t.Errorf("%s %s is not documented", m, path)
			}
		}
	}
	if strings.Contains(string(body), "problem+json") {
		t.Error("the document still describes huma's problem+json errors")
	}
	if !strings.Contains(string(doc.Paths["/api/v1/exec/async"]["post"]), `"202"`) {
		t.Error("exec/async does not document 202")
	}
	// The routes that run code in a session refuse an operator in a
	// session holding another key's secrets (engine.ErrSessionSecrets).
	for _, path := range []string{"/api/v1/sessions/{id}/execute", "/api/v1/sessions/{id}/restart", "/api/v1/sessions/{id}/fork"} {
		if o, ok := doc.Paths[path]["post"]; !ok || !strings.Contains(string(o), `"403"`) {
			t.Errorf("POST %s does not document 403 (documented: %v)", path, ok)
		}
	}
}

func TestDocs(t *testing.T) {
	ts := newTestServer(t, newFakeEngine(), nil)
	code, hdr, body := call(t, ts, http.MethodGet, "/docs", "", nil, nil)
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
		t.Fatalf("docs: %d %q", code, hdr.Get("Content-Type"))
	}
	if !strings.Contains(hdr.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Errorf("CSP = %q", hdr.Get("Content-Security-Policy"))
	}
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(string(body), -1)
	if len(refs) < 3 {
		t.Fatalf("docs page references %d assets: %s", len(refs), body)
	}
	for _, m := range refs {
		ref := m[1]
		if strings.Contains(ref, "//") {
			t.Errorf("docs page loads %q from elsewhere; everything must be embedded", ref)
			continue
		}
		t.Run(ref, func(t *testing.T) {
			code, _, asset := call(t, ts, http.MethodGet, ref, "", nil, nil)
			if code != 200 || len(asset) == 0 {
				t.Fatalf("asset %s: status %d, %d bytes", ref, code, len(asset))
			}
		})
	}
	if strings.Contains(string(body), "http://") || strings.Contains(string(body), "https://") {
		t.Errorf("docs page mentions an absolute URL: %s", body)
	}
}

func TestMetrics(t *testing.T) {
	eng := newFakeEngine()
	c := config.Default()
	s, err := New(eng, Options{Config: c})
	if err != nil {
		t.Fatal(err)
	}
	s.Metrics().ObserveExecution(&engine.Execution{Status: engine.StatusFailed, Reason: engine.ReasonTimeout, DurationMs: 1500})
	s.Metrics().ObserveExecution(&engine.Execution{Status: engine.StatusRunning}) // not final: ignored
	for range 2 {
		s.Handler().ServeHTTP(newRecorder(), mustRequest(t, http.MethodGet, "/api/v1/executions/"+idCompleted))
	}
	s.Handler().ServeHTTP(newRecorder(), mustRequest(t, http.MethodGet, "/api/v1/executions/exe_x"))
	rec := newRecorder()
	s.Handler().ServeHTTP(rec, mustRequest(t, http.MethodGet, "/metrics"))
	out := rec.Body.String()
	for _, want := range []string{
		`pyexec_executions_total{reason="timeout",status="failed"} 1`,
		`pyexec_execution_duration_seconds_count{status="failed"} 1`,
		`pyexec_queue_depth 2`,
		`pyexec_running_sandboxes 1`,
		`pyexec_capacity 4`,
		`pyexec_http_requests_total{code="200",route="GET /api/v1/executions/{id}"} 2`,
		`pyexec_http_requests_total{code="404",route="GET /api/v1/executions/{id}"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(out, `status="running"`) {
		t.Error("a running execution was counted as finished")
	}
}

// TestOpenAPIJSONBodiesAreTyped: eval and lint publish the schema of the
// body they decode (not the binary string of a raw body), which says that
// code or files is required and that unknown fields pass.
func TestOpenAPIJSONBodiesAreTyped(t *testing.T) {
	ts := newTestServer(t, newFakeEngine(), nil)
	_, _, body := call(t, ts, http.MethodGet, "/openapi.json", "", nil, nil)
	var doc struct {
		Paths map[string]map[string]struct {
			RequestBody struct {
				Required bool `json:"required"`
				Content  map[string]struct {
					Schema map[string]any `json:"schema"`
				} `json:"content"`
			} `json:"requestBody"`
		} `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				AnyOf                []map[string]any `json:"anyOf"`
				AdditionalProperties any              `json:"additionalProperties"`
				Properties           map[string]any   `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	for path, name := range map[string]string{"/api/v1/eval": "EvalRequest", "/api/v1/lint": "LintRequest"} {
		rb := doc.Paths[path]["post"].RequestBody
		if got := rb.Content["application/json"].Schema["$ref"]; !rb.Required || len(rb.Content) != 1 || got != "#/components/schemas/"+name {
			t.Errorf("%s body: required %v, %d media types, schema %v; want a required %s", path, rb.Required, len(rb.Content), rb.Content["application/json"].Schema, name)
		}
		s := doc.Components.Schemas[name]
		if len(s.AnyOf) != 2 || s.AdditionalProperties != true || s.Properties["code"] == nil || s.Properties["files"] == nil {
			t.Errorf("%s: anyOf %v, additionalProperties %v", name, s.AnyOf, s.AdditionalProperties)
		}
		// null is taken as absent by the decoder, and the schema says so.
		if code, _ := json.Marshal(s.Properties["code"]); !strings.Contains(string(code), `"null"`) {
			t.Errorf("%s: code %s does not admit null", name, code)
		}
	}
}

// TestUndeclaredMethods: a method no route serves at a path that exists is
// 405 with the methods that are served there in Allow; an unknown path
// stays 404.
func TestUndeclaredMethods(t *testing.T) {
	ts := newTestServer(t, newFakeEngine(), nil)
	tests := []struct {
		method, path string
		code         int
		allow        string
	}{
		{"TRACE", "/health", 405, "GET, HEAD"},
		{http.MethodPut, "/api/v1/executions", 405, "GET, HEAD"},
		{http.MethodOptions, "/api/v1/executions/" + idCompleted + "/files", 405, "GET, HEAD"},
		{http.MethodPost, "/api/v1/executions/" + idCompleted, 405, "GET, HEAD, DELETE"},
		{http.MethodGet, "/api/v1/nothing", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			code, hdr, body := call(t, ts, tt.method, tt.path, "", nil, nil)
			if code != tt.code || hdr.Get("Allow") != tt.allow || !strings.HasPrefix(string(body), `{"error":`) {
				t.Errorf("%d Allow %q %s, want %d Allow %q", code, hdr.Get("Allow"), body, tt.code, tt.allow)
			}
		})
	}
}
