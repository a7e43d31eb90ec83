package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/engine"
)

func TestEval(t *testing.T) {
	jsonBody := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	half := strings.Repeat("x", 51200)
	tests := []struct {
		name     string
		body     []byte
		ct       string
		fail     error
		wantCode int
		check    func(t *testing.T, req engine.Request)
	}{
		{name: "code runs as main.py", wantCode: 200,
			body: []byte(`{"code":"1 + 1","eval_last_expr":true,"python_version":"3.11","stdin":"x","requirements_txt":"-","config":{"timeout_seconds":5}}`),
			check: func(t *testing.T, req engine.Request) {
				if len(req.Files) != 1 || req.Files[0].Path != "main.py" || string(req.Files[0].Data) != "1 + 1" {
					t.Errorf("files = %+v", req.Files)
				}
				if req.Entrypoint != "main.py" || !req.EvalLastExpr || req.PythonVersion != "3.11" || req.Stdin != "x" ||
					req.Requirements != "-" || req.Timeout.Seconds() != 5 {
					t.Errorf("request = %+v", req)
				}
			}},
		{name: "files win over code and the first is the entrypoint", wantCode: 200,
			body: jsonBody(map[string]any{"code": "ignored", "files": []map[string]string{
				{"name": "app.py", "content": "import helper"}, {"name": "lib/helper.py", "content": "X = 1"}}}),
			check: func(t *testing.T, req engine.Request) {
				if req.Entrypoint != "app.py" || len(req.Files) != 2 || req.Files[1].Path != "lib/helper.py" || req.EvalLastExpr {
					t.Errorf("request = %+v", req)
				}
			}},
		{name: "explicit entrypoint", wantCode: 200,
			body: jsonBody(map[string]any{"entrypoint": "b.py", "files": []map[string]string{{"name": "a.py", "content": "1"}, {"name": "b.py", "content": "2"}}}),
			check: func(t *testing.T, req engine.Request) {
				if req.Entrypoint != "b.py" {
					t.Errorf("entrypoint = %q", req.Entrypoint)
				}
			}},
		{name: "lint alongside", body: []byte(`{"code":"1","lint":true}`), wantCode: 200,
			check: func(t *testing.T, req engine.Request) {
				if req.Lint != engine.LintWith {
					t.Errorf("Lint = %q, want %q", req.Lint, engine.LintWith)
				}
			}},
		{name: "lint only", body: []byte(`{"code":"1","lint":"only"}`), wantCode: 200,
			check: func(t *testing.T, req engine.Request) {
				if req.Lint != engine.LintOnly {
					t.Errorf("Lint = %q, want %q", req.Lint, engine.LintOnly)
				}
			}},
		{name: "lint false", body: []byte(`{"code":"1","lint":false}`), wantCode: 200,
			check: func(t *testing.T, req engine.Request) {
				if req.Lint != engine.LintOff {
					t.Errorf("Lint = %q, want off", req.Lint)
				}
			}},
		{name: "lint of another value", body: []byte(`{"code":"1","lint":"always"}`), wantCode: 400},
		{name: "unknown fields are ignored", ct: "application/x-www-form-urlencoded", body: []byte(`{"code":"print(1)","future_field":[1,2]}`), wantCode: 200},
		{name: "code at the limit", body: jsonBody(map[string]any{"code": strings.Repeat("x", 102400)}), wantCode: 200},
		{name: "code over the limit", body: jsonBody(map[string]any{"code": strings.Repeat("x", 102401)}), wantCode: 413},
		{name: "files over the limit in total", wantCode: 413,
			body: jsonBody(map[string]any{"files": []map[string]string{{"name": "a.py", "content": half}, {"name": "b.py", "content": half + "y"}}})},
		{name: "malformed json", body: []byte(`{"code": "print(1)"`), wantCode: 400},
		{name: "not an object", body: []byte(`["print(1)"]`), wantCode: 400},
		{name: "wrong field type", body: []byte(`{"code": 42}`), wantCode: 400},
		{name: "empty body", body: nil, wantCode: 400},
		{name: "neither code nor files", body: []byte(`{"stdin":"x"}`), wantCode: 400},
		{name: "file name escapes", body: jsonBody(map[string]any{"files": []map[string]string{{"name": "../x.py", "content": "1"}}}), wantCode: 400},
		{name: "absolute file name", body: jsonBody(map[string]any{"files": []map[string]string{{"name": "/tmp/x.py", "content": "1"}}}), wantCode: 400},
		{name: "duplicate file names", body: jsonBody(map[string]any{"files": []map[string]string{{"name": "a.py", "content": "1"}, {"name": "./a.py", "content": "2"}}}), wantCode: 400},
		{name: "too many files", body: jsonBody(map[string]any{"files": func() []map[string]string {
			var fs []map[string]string
			for i := range 6 {
				fs = append(fs, map[string]string{"name": fmt.Sprintf("f%d.py", i), "content": "1"})
			}
			return fs
		}()}), wantCode: 413},
		{name: "entrypoint escapes the workspace", body: []byte(`{"code":"1","entrypoint":"../other.py"}`), wantCode: 400},
		{name: "unknown python_version", body: []byte(`{"code":"1","python_version":"2.7"}`), wantCode: 400},
		{name: "timeout over max", body: []byte(`{"code":"1","config":{"timeout_seconds":9999}}`), wantCode: 400},
		{name: "network asked but disabled on server", body: []byte(`{"code":"1","config":{"network_disabled":false}}`), wantCode: 400},
		{name: "overloaded", body: []byte(`{"code":"1"}`), fail: engine.ErrOverloaded, wantCode: 429},
		{name: "body over the cap", body: jsonBody(map[string]any{"code": "1", "pad": strings.Repeat("p", 1<<20)}), wantCode: 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := newFakeEngine()
			eng.fail = tt.fail
			ts := newTestServer(t, eng, nil)
			ct := tt.ct
			if ct == "" {
				ct = "application/json"
			}
			code, hdr, resp := call(t, ts, http.MethodPost, "/api/v1/eval", ct, tt.body, nil)
			if code != tt.wantCode {
				t.Errorf("status = %d, want %d; body %.300s", code, tt.wantCode, resp)
			}
			if code == http.StatusTooManyRequests && hdr.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
			if tt.wantCode != 200 || tt.check != nil {
				checkGolden(t, goldenName(t), code, hdr, resp)
			}
			req, accepted := eng.lastRequest()
			if tt.wantCode >= 400 && accepted {
				t.Errorf("a rejected request reached the engine: %+v", req)
			}
			if tt.check != nil {
				tt.check(t, req)
			}
		})
	}
}
