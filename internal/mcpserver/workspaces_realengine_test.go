package mcpserver_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/client"
	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/engine/enginetest"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/store"
)

// The workspace tools over a real server with workspaces: a file written
// with write_workspace_file is read by a run_python that names the
// workspace, the run's own file comes back through read_workspace_file,
// and a session with the workspace sees both; over /mcp and over stdio
// with the Go client as backend.
func TestRealEngineWorkspaces(t *testing.T) {
	eng := enginetest.StartWithWorkspaces(t, engine.Config{Concurrency: 2, QueueSize: 2, DefaultTimeout: 20 * time.Second,
		Sessions: engine.SessionConfig{Max: 2, DefaultMemoryBytes: 64 << 20}},
		func(_ *store.NATS, jails *sandbox.Manager) engine.Deps { return engine.Deps{Jails: jails} })
	c := config.Default()
	c.MaxConcurrency, c.QueueSize = 2, 2
	ts := serveAPI(t, eng, c)
	api := client.New(ts.URL)
	transports := []struct {
		name, workspace string
		make            func(t *testing.T) mcp.Transport
	}{
		{"streamable HTTP at /mcp", "over-http", func(*testing.T) mcp.Transport {
			return &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", MaxRetries: -1}
		}},
		{"stdio framing, Go client backend", "over-stdio", func(t *testing.T) mcp.Transport {
			return stdioTransport(t, client.New(ts.URL))
		}},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			ctx := context.Background()
			if _, err := api.CreateWorkspace(ctx, tr.workspace, 16); err != nil {
				t.Fatal(err)
			}
			cs, _ := session(t, tr.make(t))
			callOK := func(name string, args map[string]any) (string, map[string]any) {
				t.Helper()
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
				if err != nil || res.IsError {
					t.Fatalf("%s: %v %q", name, err, textOf(res))
				}
				out, _ := res.StructuredContent.(map[string]any)
				return textOf(res), out
			}

			text, out := callOK("list_workspaces", map[string]any{})
			if !strings.Contains(text, tr.workspace+": version 0") {
				t.Errorf("list_workspaces: %q %v", text, out)
			}
			_, out = callOK("write_workspace_file", map[string]any{"workspace": tr.workspace, "path": "in/data.txt", "content": "from the agent"})
			if out["version"] != 1.0 || out["changed"] != true {
				t.Errorf("write_workspace_file: %v", out)
			}
			text, out = callOK("run_python", map[string]any{"workspace": tr.workspace,
				"code": "print(open('/workspace/in/data.txt').read())\nopen('/workspace/out.txt', 'w').write('from the run')"})
			ws, _ := out["workspace"].(map[string]any)
			if !strings.Contains(text, "from the agent") || !strings.Contains(text, "workspace "+tr.workspace+": version 2 (1 added") ||
				ws["version"] != 2.0 {
				t.Errorf("run_python with the workspace: %q %v", text, ws)
			}
			if text, _ = callOK("read_workspace_file", map[string]any{"workspace": tr.workspace, "path": "out.txt"}); text != "from the run" {
				t.Errorf("read_workspace_file: %q", text)
			}
			_, out = callOK("list_workspace_files", map[string]any{"workspace": tr.workspace})
			var paths []string
			for _, e := range out["entries"].([]any) {
				paths = append(paths, e.(map[string]any)["path"].(string))
			}
			if !slices.Equal(paths, []string{"in", "in/data.txt", "out.txt"}) {
				t.Errorf("list_workspace_files: %v", paths)
			}

			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"workspace": tr.workspace,
				"workspace_read_only": true, "code": "open('/workspace/out.txt', 'w').write('no')"}})
			if err != nil || !res.IsError || !strings.Contains(textOf(res), "Read-only file system") {
				t.Errorf("a write to a read-only workspace: %v %q", err, textOf(res))
			}

			_, out = callOK("create_session", map[string]any{"workspace": tr.workspace})
			id := out["session_id"].(string)
			text, _ = callOK("run_python", map[string]any{"session_id": id, "code": "open('/workspace/out.txt').read()"})
			if !strings.Contains(text, "'from the run'") {
				t.Errorf("a session with the workspace: %q", text)
			}
			callOK("close_session", map[string]any{"session_id": id})

			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_workspace_file", Arguments: map[string]any{"workspace": "no-such", "path": "x"}})
			if err != nil || !res.IsError || !strings.Contains(textOf(res), "not found") {
				t.Errorf("an unknown workspace: %v %q", err, textOf(res))
			}
		})
	}
}
