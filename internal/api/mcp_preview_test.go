package api

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPPreviewTool, through /mcp over the real engine: on a server with
// --preview an agent gets a preview URL of its session's app that opens
// it without a key, at the origin it reached; revoking stops it.
func TestMCPPreviewTool(t *testing.T) {
	st := startPreviewStack(t, time.Hour)
	a := mcpAs(t, st.api, keyA)
	list, err := a.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(list.Tools, func(tool *mcp.Tool) bool { return tool.Name == "preview_session_port" }) {
		t.Error("a server with --preview does not offer preview_session_port")
	}
	code, _, body := call(t, st.api, http.MethodGet, "/api/v1/tools?format=anthropic", "", nil, as(keyA))
	if code != http.StatusOK || !strings.Contains(string(body), `"preview_session_port"`) {
		t.Errorf("GET /api/v1/tools with --preview: %d, preview_session_port missing", code)
	}
	if code, _, body := call(t, st.api, http.MethodGet, "/health", "", nil, nil); code != http.StatusOK || !strings.Contains(string(body), `"previews":true`) {
		t.Errorf("/health with --preview: %d %s", code, body)
	}

	failed, text, out := callTool(t, a, "preview_session_port", map[string]any{"session_id": st.session, "port": 8000})
	url, _ := out["url"].(string)
	if failed || !strings.HasPrefix(url, st.api.URL+"/preview/") || out["isolation"] != "sandbox" || !strings.Contains(text, url) {
		t.Fatalf("preview_session_port: failed=%v %q %v", failed, text, out)
	}
	if exp, err := time.Parse(time.RFC3339, out["expires_at"].(string)); err != nil || time.Until(exp) < 50*time.Minute {
		t.Errorf("expires_at %v: %v", out["expires_at"], err)
	}
	path := strings.TrimPrefix(url, st.api.URL)
	if code, _, body := get(t, st.api, "", path+"headers", nil); code != http.StatusOK {
		t.Fatalf("the preview URL without a key: %d %s", code, body)
	} else if p, _ := appSaw(t, body); p != "/headers" {
		t.Errorf("the app saw %q", p)
	}

	failed, text, out = callTool(t, a, "preview_session_port", map[string]any{"session_id": st.session, "port": 8000, "revoke": true})
	if failed || out["revoked"] != 1.0 {
		t.Fatalf("revoke: failed=%v %q %v", failed, text, out)
	}
	if code, _, body := get(t, st.api, "", path+"headers", nil); code != http.StatusForbidden || !strings.Contains(string(body), "revoked") {
		t.Errorf("the revoked URL: %d %s", code, body)
	}

}
