package api

import (
	"archive/tar"
	"net/http"
	"testing"

	"github.com/pyexec/pyexec/internal/config"
)

func TestAuth(t *testing.T) {
	eng := newFakeEngine()
	ts := newTestServer(t, eng, func(c *config.Config) {
		c.APIKeys = []string{"ci:" + testKey, testKey + "-other"}
	})
	get := "/api/v1/executions/" + idCompleted
	tests := []struct {
		name     string
		path     string
		header   map[string]string
		wantCode int
	}{
		{"missing key", get, nil, 401},
		{"wrong bearer key", get, map[string]string{"Authorization": "Bearer " + testKey + "x"}, 401},
		{"wrong X-API-Key", get, map[string]string{"X-API-Key": "nope"}, 401},
		{"basic auth is not a key", get, map[string]string{"Authorization": "Basic Y2k6eA=="}, 401},
		{"bearer key", get, map[string]string{"Authorization": "Bearer " + testKey}, 200},
		{"X-API-Key", get, map[string]string{"X-API-Key": testKey + "-other"}, 200},
		{"metrics need a key", "/metrics", nil, 401},
		{"health is open", "/health", nil, 200},
		{"readyz is open", "/readyz", nil, 200},
		{"docs are open", "/docs", nil, 200},
		{"docs assets are open", "/docs/assets/init.js", nil, 200},
		{"openapi is open", "/openapi.json", nil, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, hdr, body := call(t, ts, http.MethodGet, tt.path, "", nil, tt.header)
			if code != tt.wantCode {
				t.Fatalf("status = %d, want %d: %.200s", code, tt.wantCode, body)
			}
			if code == 401 {
				checkGolden(t, goldenName(t), code, hdr, body)
				if hdr.Get("WWW-Authenticate") == "" {
					t.Error("401 without WWW-Authenticate")
				}
			}
		})
	}

	t.Run("caller is recorded", func(t *testing.T) {
		ct, body := multipartBody(t, makeTar(t, tar.FormatUSTAR, tarEntry{Name: "main.py", Body: "pass"}), `{}`, metaFormField)
		code, _, resp := call(t, ts, http.MethodPost, "/api/v1/exec/async", ct, body, map[string]string{"Authorization": "Bearer " + testKey})
		if code != http.StatusAccepted {
			t.Fatalf("status = %d: %s", code, resp)
		}
		req, _ := eng.lastRequest()
		if req.Caller != "ci" || req.ClientAddr != "127.0.0.1" {
			t.Errorf("caller = %q from %q, want ci from 127.0.0.1", req.Caller, req.ClientAddr)
		}
	})
}
