package mcpserver_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/pyenv"
	"github.com/pyexec/pyexec/internal/pyenv/pyenvtest"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/store"
)

func TestRealEngineSessionRequirements(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real jails and installs; skipped with -short")
	}
	pythons, err := pyenv.Discover(context.Background(), pyenv.OptionsFromEnv(os.Getenv))
	if err != nil {
		t.Skipf("no python interpreter: %v", err)
	}
	uv, _ := pyenvtest.Tools(t)
	ix := pyenvtest.NewIndex(t,
		pyenvtest.Wheel{Name: "tinyreq", Version: "1.2", Files: map[string]string{"tinyreq.py": "VERSION = '1.2'\n"}},
		pyenvtest.Wheel{Name: "other", Version: "0.1", Files: map[string]string{"other.py": "X = 'other'\n"}})
	envs, err := pyenv.NewEnvironments(pyenv.EnvConfig{Dir: pyenvtest.EnvDir(t), IndexURL: ix.URL, UV: uv, Base: []string{"tinyreq"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(envs.Close)
	ts := serveEngine(t, func(_ *store.NATS, jails *sandbox.Manager) engine.Deps {
		res, err := pyenv.NewResolver(pyenv.NewAnalyzer(jails, pyenv.AnalyzerConfig{}), pyenv.ResolverConfig{})
		if err != nil {
			t.Fatal(err)
		}
		return engine.Deps{Interpreters: engine.PyenvInterpreters{Set: pythons}, Jails: jails,
			Envs: engine.PyenvEnvironments{Resolver: res, Envs: envs}}
	})
	cs, progress := session(t, &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", MaxRetries: -1})
	ctx := context.Background()

	params := &mcp.CallToolParams{Name: "create_session", Arguments: map[string]any{"requirements": []string{"other"}}}
	params.SetProgressToken("session-install")
	res, err := cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("create_session: %v %q", err, textOf(res))
	}
	waitFor(t, progress, "install: ")
	id := res.StructuredContent.(map[string]any)["session_id"].(string)
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{
		"code": "import tinyreq, other\nprint(tinyreq.VERSION, other.X)", "session_id": id}})
	if err != nil || res.IsError || !strings.Contains(textOf(res), "1.2 other") {
		t.Fatalf("run_python in the session: %v %q", err, textOf(res))
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_session", Arguments: map[string]any{"requirements": []string{"no-such-dist"}}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "install_error") || !strings.Contains(textOf(res), "no-such-dist") {
		t.Fatalf("create_session with a missing distribution: %v %q", err, textOf(res))
	}
}
