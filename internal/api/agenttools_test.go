package api

import (
	"net/http"
	"slices"
	"testing"

	"github.com/pyexec/pyexec/internal/mcpserver"
)

// TestToolsOfferEveryMCPTool: GET /api/v1/tools lists the MCP server's
// tools, all but preview_session_port on a server without --preview
// (TestMCPPreviewTool has it with).
func TestToolsOfferEveryMCPTool(t *testing.T) {
	ts := newTestServer(t, newFakeEngine(), nil)
	var want []string
	for _, d := range mcpserver.AvailableDefinitions(true, false) {
		want = append(want, d.Name)
	}
	for _, name := range []string{"run_python", "lint_python", "list_files", "read_file"} {
		if !slices.Contains(want, name) {
			t.Fatalf("the MCP catalogue lacks %s: %v", name, want)
		}
	}
	tests := []struct {
		format string
		name   func(tool map[string]any) string
	}{
		{"openai", func(tool map[string]any) string {
			fn, _ := tool["function"].(map[string]any)
			name, _ := fn["name"].(string)
			return name
		}},
		{"anthropic", func(tool map[string]any) string {
			name, _ := tool["name"].(string)
			return name
		}},
		{"openai-responses", func(tool map[string]any) string {
			name, _ := tool["name"].(string)
			return name
		}},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			code, _, body := call(t, ts, http.MethodGet, "/api/v1/tools?format="+tt.format, "", nil, nil)
			if code != http.StatusOK {
				t.Fatalf("%d %s", code, body)
			}
			list := decode[struct {
				Tools []map[string]any `json:"tools"`
			}](t, body)
			var got []string
			for _, tool := range list.Tools {
				got = append(got, tt.name(tool))
			}
			if !slices.Equal(got, want) {
				t.Errorf("tools %v, want %v", got, want)
			}
		})
	}
}
