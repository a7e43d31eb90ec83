package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/pyexec/pyexec/internal/engine"
)

func TestLint(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		fail     error
		wantCode int
		wantN    int // diagnostics
	}{
		{name: "code with an unused import", body: `{"code":"import os\nprint(1)\n"}`, wantCode: 200, wantN: 1},
		{name: "files name their diagnostics", body: `{"files":[{"name":"app.py","content":"import os\n"},{"name":"lib/util.py","content":"x = 1\nimport os\n"}]}`, wantCode: 200, wantN: 2},
		{name: "clean code is an empty list", body: `{"code":"import os\n","select":["E"]}`, wantCode: 200},
		{name: "bad rule selector", body: `{"code":"x","ignore":["e501"]}`, wantCode: 400},
		{name: "select of wrong type", body: `{"code":"x","select":"E"}`, wantCode: 400},
		{name: "neither code nor files", body: `{"select":["E"]}`, wantCode: 400},
		{name: "file name escapes", body: `{"files":[{"name":"../x.py","content":"1"}]}`, wantCode: 400},
		{name: "no linter on the server", body: `{"code":"x"}`, fail: fmt.Errorf("%w: lint is not available on this server (ruff is not installed)", engine.ErrInvalid), wantCode: 400},
		{name: "engine closed", body: `{"code":"x"}`, fail: engine.ErrClosed, wantCode: 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := newFakeEngine()
			eng.fail = tt.fail
			ts := newTestServer(t, eng, nil)
			code, hdr, resp := call(t, ts, http.MethodPost, "/api/v1/lint", "application/json", []byte(tt.body), nil)
			if code != tt.wantCode {
				t.Fatalf("status = %d, want %d: %s", code, tt.wantCode, resp)
			}
			checkGolden(t, goldenName(t), code, hdr, resp)
			if code != 200 {
				return
			}
			var diags []map[string]json.RawMessage
			if err := json.Unmarshal(resp, &diags); err != nil {
				t.Fatalf("the response is not a list: %s", resp)
			}
			if len(diags) != tt.wantN {
				t.Fatalf("%d diagnostics, want %d: %s", len(diags), tt.wantN, resp)
			}
			for _, d := range diags {
				for _, k := range []string{"code", "message", "location", "end_location", "fix", "filename"} {
					if _, ok := d[k]; !ok {
						t.Errorf("diagnostic lacks %q: %s", k, resp)
					}
				}
			}
		})
	}
}
