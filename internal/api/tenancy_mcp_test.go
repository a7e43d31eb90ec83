package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/mcpserver"
)

// keyTransport sends every request with an API key.
type keyTransport struct{ key string }

func (k keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-API-Key", k.key)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpAs opens an MCP session on /mcp with key.
func mcpAs(t *testing.T, ts *httptest.Server, key string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "tenancy-test"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL + mcpPath,
		HTTPClient: &http.Client{Transport: keyTransport{key}}, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls a tool and returns whether it failed, its text and its
// structured output.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (bool, string, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	out, _ := res.StructuredContent.(map[string]any)
	return res.IsError, text.String(), out
}

// mcpToolCase is what one tool does with another key's work: args builds
// its arguments from a's execution and session ids.
type mcpToolCase struct {
	tool string
	args func(exe, ses string) map[string]any
	// owned: the tool reaches a's work through the ids. A tool that
	// touches nothing of anyone's has instead a check of what b's call
	// made (nil: it must only not mention a's work).
	owned bool
	check func(t *testing.T, ts *httptest.Server, out map[string]any)
	// snap, when set, builds the arguments from a's snapshot instead.
	snap func(snap string) map[string]any
}

// argsFor builds the tool's arguments from a's ids.
func (c mcpToolCase) argsFor(exe, ses, snap string) map[string]any {
	if c.snap != nil {
		return c.snap(snap)
	}
	return c.args(exe, ses)
}

var mcpToolCases = []mcpToolCase{
	{tool: "run_python", owned: true, args: func(_, ses string) map[string]any {
		return map[string]any{"code": "print('b in a session')", "session_id": ses}
	}},
	// a's workspace is named as a's session (a valid name, and one the
	// unknown case replaces).
	{tool: "run_python", owned: true, args: func(_, ses string) map[string]any {
		return map[string]any{"code": "print(open('/workspace/a-only.txt').read())", "workspace": ses}
	}},
	{tool: "list_workspaces", args: func(_, _ string) map[string]any { return map[string]any{} }},
	{tool: "list_workspace_files", owned: true, args: func(_, ses string) map[string]any { return map[string]any{"workspace": ses} }},
	{tool: "read_workspace_file", owned: true, args: func(_, ses string) map[string]any {
		return map[string]any{"workspace": ses, "path": "a-only.txt"}
	}},
	{tool: "write_workspace_file", owned: true, args: func(_, ses string) map[string]any {
		return map[string]any{"workspace": ses, "path": "a-only.txt", "content": "b was here"}
	}},
	{tool: "list_files", owned: true, args: func(exe, _ string) map[string]any { return map[string]any{"execution_id": exe} }},
	{tool: "read_file", owned: true, args: func(exe, _ string) map[string]any {
		return map[string]any{"execution_id": exe, "path": "out.txt"}
	}},
	{tool: "close_session", owned: true, args: func(_, ses string) map[string]any { return map[string]any{"session_id": ses} }},
	{tool: "snapshot_session", owned: true, args: func(_, ses string) map[string]any { return map[string]any{"session_id": ses} }},
	{tool: "fork_session", owned: true, args: func(_, ses string) map[string]any { return map[string]any{"session_id": ses} }},
	{tool: "preview_session_port", owned: true, args: func(_, ses string) map[string]any {
		return map[string]any{"session_id": ses, "port": 8000}
	}},
	{tool: "preview_session_port", owned: true, args: func(_, ses string) map[string]any {
		return map[string]any{"session_id": ses, "port": 8000, "revoke": true}
	}},
	{tool: "delete_snapshot", owned: true, snap: func(snap string) map[string]any { return map[string]any{"snapshot_id": snap} }},
	{tool: "create_session", owned: true, snap: func(snap string) map[string]any { return map[string]any{"from_snapshot": snap} }},
	// a's snapshot names a's session: the text check sees it.
	{tool: "list_snapshots", args: func(_, _ string) map[string]any { return map[string]any{} }},
	{tool: "lint_python", args: func(_, _ string) map[string]any { return map[string]any{"code": "import os\n"} }},
	{tool: "create_session", args: func(_, _ string) map[string]any { return map[string]any{} },
		check: func(t *testing.T, ts *httptest.Server, out map[string]any) {
			ses, _ := out["session_id"].(string)
			codeB, _ := call2(t, ts, http.MethodGet, "/api/v1/sessions/"+ses, keyB)
			codeA, _ := call2(t, ts, http.MethodGet, "/api/v1/sessions/"+ses, keyA)
			if ses == "" || codeB != 200 || codeA != 404 {
				t.Errorf("b's MCP session %q: b gets %d, a gets %d; want 200 and 404", ses, codeB, codeA)
			}
		}},
}

func TestTenancyMCPToolsCovered(t *testing.T) {
	for _, d := range mcpserver.Definitions() {
		if !slices.ContainsFunc(mcpToolCases, func(c mcpToolCase) bool { return c.tool == d.Name }) {
			t.Errorf("MCP tool %s has no two-key case in mcpToolCases", d.Name)
		}
	}
}

func TestTenancyMCP(t *testing.T) {
	ts := tenancyServer(t)
	a, b, admin := mcpAs(t, ts, keyA), mcpAs(t, ts, keyB), mcpAs(t, ts, keyAdmin)

	failed, text, out := callTool(t, a, "run_python", map[string]any{"code": "open('out.txt', 'w').write('secret of a')"})
	exe, _ := out["execution_id"].(string)
	if failed || exe == "" {
		t.Fatalf("a's run_python: %s", text)
	}
	failed, text, out = callTool(t, a, "create_session", map[string]any{})
	ses, _ := out["session_id"].(string)
	if failed || ses == "" {
		t.Fatalf("a's create_session: %s", text)
	}
	failed, text, out = callTool(t, a, "snapshot_session", map[string]any{"session_id": ses})
	snap, _ := out["snapshot_id"].(string)
	if failed || snap == "" {
		t.Fatalf("a's snapshot_session: %s", text)
	}

	createWorkspace(t, ts, keyA, ses)
	if code, _, body := call(t, ts, http.MethodPut, "/api/v1/workspaces/"+ses+"/files/a-only.txt", "application/octet-stream",
		[]byte("secret of a"), as(keyA)); code != http.StatusOK {
		t.Fatalf("a's workspace file: %d %s", code, body)
	}

	t.Run("tools act as their caller", func(t *testing.T) {
		if code, _ := call2(t, ts, http.MethodGet, "/api/v1/executions/"+exe, keyA); code != 200 {
			t.Errorf("a's own MCP execution over the API: %d", code)
		}
		if code, _ := call2(t, ts, http.MethodGet, "/api/v1/executions/"+exe, keyB); code != 404 {
			t.Errorf("a's MCP execution read by b over the API: %d", code)
		}
		if code, _ := call2(t, ts, http.MethodGet, "/api/v1/sessions/"+ses, keyB); code != 404 {
			t.Errorf("a's MCP session read by b over the API: %d", code)
		}
	})

	unknownExe, unknownSes := "exe_00000000-0000-7000-8000-000000000000", "ses_00000000-0000-7000-8000-000000000000"
	const unknownSnap = "snap_000000000000000000000000"
	for _, c := range mcpToolCases {
		t.Run(c.tool, func(t *testing.T) {
			failed, text, out := callTool(t, b, c.tool, c.argsFor(exe, ses, snap))
			if !c.owned {
				if strings.Contains(text, exe) || strings.Contains(text, ses) || strings.Contains(text, snap) {
					t.Errorf("b's %s mentions a's work: %s", c.tool, text)
				}
				if c.check != nil {
					c.check(t, ts, out)
				}
				return
			}
			_, wantText, _ := callTool(t, b, c.tool, c.argsFor(unknownExe, unknownSes, unknownSnap))
			wantText = strings.NewReplacer(unknownExe, exe, unknownSes, ses, unknownSnap, snap).Replace(wantText)
			if !failed || text != wantText {
				t.Errorf("b's %s on a's work: failed=%v %q; want what unknown ids get: %q", c.tool, failed, text, wantText)
			}
			if strings.Contains(text, "secret") {
				t.Errorf("b saw a's data: %s", text)
			}
		})
	}

	t.Run("another key cannot use the MCP session", func(t *testing.T) {
		init := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"list_files","arguments":{"execution_id":"` + exe + `"}}}`
		for _, tc := range []struct {
			method, body, id string
		}{
			{http.MethodPost, init, a.ID()},
			{http.MethodGet, "", a.ID()},
			{http.MethodDelete, "", a.ID()},
			{http.MethodPost, init, "no-such-session"},
		} {
			// A bounded client: a request let into the session would open
			// a stream that does not end.
			req, err := http.NewRequest(tc.method, ts.URL+mcpPath, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", tc.id)
			res, err := (&http.Client{Transport: keyTransport{keyB}, Timeout: 10 * time.Second}).Do(req)
			if err != nil {
				t.Errorf("%s with session %s and key b: %v", tc.method, tc.id, err)
				continue
			}
			body, err := io.ReadAll(res.Body)
			res.Body.Close()
			code := res.StatusCode
			var e Error
			if err != nil || code != http.StatusNotFound || json.Unmarshal(body, &e) != nil || !strings.Contains(e.Message, "MCP session not found for this API key") {
				t.Errorf("%s with session %s and key b: %d %s; want 404 session not found", tc.method, tc.id, code, body)
			}
		}
		if failed, text, _ := callTool(t, a, "list_files", map[string]any{"execution_id": exe}); failed || !strings.Contains(text, "out.txt") {
			t.Errorf("a's own session after b's attempts: %s", text)
		}
	})

	t.Run("a's workspace is as a left it", func(t *testing.T) {
		if failed, text, _ := callTool(t, a, "read_workspace_file", map[string]any{"workspace": ses, "path": "a-only.txt"}); failed || text != "secret of a" {
			t.Errorf("a's read_workspace_file after b's calls: failed=%v %q", failed, text)
		}
	})

	t.Run("admin reaches a's work", func(t *testing.T) {
		if failed, text, _ := callTool(t, admin, "read_file", map[string]any{"execution_id": exe, "path": "out.txt"}); failed || text != "secret of a" {
			t.Errorf("admin read_file: failed=%v %q", failed, text)
		}
		if failed, text, _ := callTool(t, admin, "close_session", map[string]any{"session_id": ses}); failed {
			t.Errorf("admin close_session: %s", text)
		}
		if code, _ := call2(t, ts, http.MethodGet, "/api/v1/sessions/"+ses, keyA); code != 404 {
			t.Errorf("a's session after the admin closed it: %d", code)
		}
	})
}
