package api

import (
	"net/http"
	"strings"
	"testing"
)

func TestTools(t *testing.T) {
	ts := newTestServer(t, newFakeEngine(), nil)
	tests := []struct {
		name, query string
		check       func(t *testing.T, tool map[string]any)
	}{
		{"openai is the default", "", checkOpenAI},
		{"openai", "?format=openai", checkOpenAI},
		{"anthropic", "?format=anthropic", func(t *testing.T, tool map[string]any) {
			schema, _ := tool["input_schema"].(map[string]any)
			if tool["name"] != "run_python" || tool["description"] == "" || schema["type"] != "object" {
				t.Errorf("anthropic tool %v", tool)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, body := call(t, ts, http.MethodGet, "/api/v1/tools"+tt.query, "", nil, nil)
			if code != http.StatusOK {
				t.Fatalf("%d %s", code, body)
			}
			list := decode[struct {
				Format string           `json:"format"`
				Tools  []map[string]any `json:"tools"`
			}](t, body)
			if len(list.Tools) == 0 {
				t.Fatalf("no tools: %s", body)
			}
			tt.check(t, list.Tools[0])
		})
	}

	t.Run("an unknown format is 400", func(t *testing.T) {
		code, _, body := call(t, ts, http.MethodGet, "/api/v1/tools?format=gemini", "", nil, nil)
		if code != http.StatusBadRequest || !strings.Contains(decode[Error](t, body).Message, "format") {
			t.Fatalf("%d %s", code, body)
		}
	})
}

func checkOpenAI(t *testing.T, tool map[string]any) {
	t.Helper()
	fn, _ := tool["function"].(map[string]any)
	params, _ := fn["parameters"].(map[string]any)
	props, _ := params["properties"].(map[string]any)
	if tool["type"] != "function" || fn["name"] != "run_python" || props["code"] == nil {
		t.Errorf("openai tool %v", tool)
	}
}
