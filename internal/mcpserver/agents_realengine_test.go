package mcpserver_test

import (
	"bytes"
	"context"
	"image/png"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/client"
	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/engine/enginetest"
	"github.com/pyexec/pyexec/internal/pyenv"
	"github.com/pyexec/pyexec/internal/pyenv/pyenvtest"
	"github.com/pyexec/pyexec/internal/runner/runnertest"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/store"
)

// serveEngine starts an engine with deps (store and jails filled in) and
// serves the API, /mcp included, over it.
func serveEngine(t *testing.T, deps enginetest.Deps) *httptest.Server {
	t.Helper()
	eng := enginetest.Start(t, engine.Config{Concurrency: 2, QueueSize: 4, DefaultTimeout: 60 * time.Second}, deps)
	return serveAPI(t, eng, config.Default())
}

// newRichServer serves an engine whose interpreter has matplotlib and
// pandas, with artifact storage and ruff's lint.
func newRichServer(t *testing.T) *httptest.Server {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real jails; skipped with -short")
	}
	python, mount := runnertest.RichPython(t)
	_, ruff := pyenvtest.Tools(t)
	return serveEngine(t, func(st *store.NATS, jails *sandbox.Manager) engine.Deps {
		linter, err := pyenv.NewLinter(jails, pyenv.LintConfig{Ruff: ruff})
		if err != nil {
			t.Fatal(err)
		}
		return engine.Deps{Interpreters: enginetest.Interpreter{Path: python, Mount: mount}, Artifacts: st, Linter: engine.PyenvLinter{L: linter}}
	})
}

// plotCode draws a figure, saves a copy, writes a CSV and a results dict.
const plotCode = `import os
import matplotlib.pyplot as plt
plt.figure(figsize=(4, 3), dpi=50)
plt.plot([1, 3, 2])
plt.savefig("chart.png")
os.makedirs("out")
with open("out/data.csv", "w") as f:
    f.write("x,y\n1,3\n")
results = {"points": 3}
print("drawn")
`

func TestRealEngineAgentTools(t *testing.T) {
	ts := newRichServer(t)
	transports := []struct {
		name string
		make func(t *testing.T) mcp.Transport
	}{
		{"streamable HTTP at /mcp", func(*testing.T) mcp.Transport {
			return &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", MaxRetries: -1}
		}},
		{"stdio framing, Go client backend", func(t *testing.T) mcp.Transport {
			return stdioTransport(t, client.New(ts.URL))
		}},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			cs, _ := session(t, tr.make(t))
			ctx := context.Background()
			call := func(t *testing.T, name string, args map[string]any) *mcp.CallToolResult {
				t.Helper()
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
				if err != nil {
					t.Fatalf("protocol error: %v", err)
				}
				return res
			}

			res := call(t, "run_python", map[string]any{"code": plotCode})
			if res.IsError {
				t.Fatalf("run failed: %s", textOf(res))
			}
			out, _ := res.StructuredContent.(map[string]any)
			id, _ := out["execution_id"].(string)

			t.Run("run_python returns the plot as a PNG image", func(t *testing.T) {
				img := firstImage(res)
				if img == nil || img.MIMEType != "image/png" {
					t.Fatalf("no PNG image content in %+v", res.Content)
				}
				cfg, err := png.DecodeConfig(bytes.NewReader(img.Data))
				if err != nil || cfg.Width != 200 || cfg.Height != 150 {
					t.Fatalf("image %dx%d, err %v; want 200x150", cfg.Width, cfg.Height, err)
				}
			})

			t.Run("run_python lists results and files", func(t *testing.T) {
				txt := textOf(res)
				for _, w := range []string{"--- stdout ---\ndrawn\n", "--- results ---\n{\"points\":3}", "chart.png (", "out/data.csv (8 bytes, text/csv"} {
					if !strings.Contains(txt, w) {
						t.Errorf("text %q does not contain %q", txt, w)
					}
				}
				if r, _ := out["results"].(map[string]any); r["points"] != 3.0 {
					t.Errorf("structured results %v", out["results"])
				}
			})

			t.Run("list_files lists what the run wrote", func(t *testing.T) {
				res := call(t, "list_files", map[string]any{"execution_id": id})
				txt := textOf(res)
				if res.IsError || !strings.Contains(txt, "2 files of execution "+id) || !strings.Contains(txt, "out/data.csv") {
					t.Fatalf("isError %v, text %q", res.IsError, txt)
				}
			})

			t.Run("read_file returns a CSV as text", func(t *testing.T) {
				res := call(t, "read_file", map[string]any{"execution_id": id, "path": "out/data.csv"})
				if res.IsError || textOf(res) != "x,y\n1,3\n" {
					t.Fatalf("isError %v, text %q", res.IsError, textOf(res))
				}
			})

			t.Run("read_file returns a saved plot as an image", func(t *testing.T) {
				res := call(t, "read_file", map[string]any{"execution_id": id, "path": "chart.png"})
				img := firstImage(res)
				if res.IsError || img == nil {
					t.Fatalf("isError %v, content %+v", res.IsError, res.Content)
				}
				if _, err := png.Decode(bytes.NewReader(img.Data)); err != nil {
					t.Fatalf("not a PNG: %v", err)
				}
			})

			t.Run("read_file of an unknown path names the files", func(t *testing.T) {
				res := call(t, "read_file", map[string]any{"execution_id": id, "path": "nope.txt"})
				if !res.IsError || !strings.Contains(textOf(res), "its files are: ") {
					t.Fatalf("isError %v, text %q", res.IsError, textOf(res))
				}
			})

			t.Run("lint_python reports ruff's diagnostics", func(t *testing.T) {
				res := call(t, "lint_python", map[string]any{"code": "import os\nprint(undefined)\n"})
				txt := textOf(res)
				if res.IsError || !strings.Contains(txt, "main.py:1:8: F401") || !strings.Contains(txt, "main.py:2:7: F821") {
					t.Fatalf("isError %v, text %q", res.IsError, txt)
				}
			})
		})
	}
}

func firstImage(res *mcp.CallToolResult) *mcp.ImageContent {
	for _, c := range res.Content {
		if img, ok := c.(*mcp.ImageContent); ok {
			return img
		}
	}
	return nil
}

// newEnvServer serves an engine that installs requirements with uv from
// a loopback index holding one small package, tinyreq.
func newEnvServer(t *testing.T) *httptest.Server {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real jails and installs; skipped with -short")
	}
	pythons, err := pyenv.Discover(context.Background(), pyenv.OptionsFromEnv(os.Getenv))
	if err != nil {
		t.Skipf("no python interpreter: %v", err)
	}
	uv, _ := pyenvtest.Tools(t)
	ix := pyenvtest.NewIndex(t, pyenvtest.Wheel{Name: "tinyreq", Version: "1.2", Files: map[string]string{"tinyreq.py": "VERSION = '1.2'\n"}})
	envs, err := pyenv.NewEnvironments(pyenv.EnvConfig{Dir: pyenvtest.EnvDir(t), IndexURL: ix.URL, UV: uv, Base: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(envs.Close)
	return serveEngine(t, func(_ *store.NATS, jails *sandbox.Manager) engine.Deps {
		res, err := pyenv.NewResolver(pyenv.NewAnalyzer(jails, pyenv.AnalyzerConfig{}), pyenv.ResolverConfig{})
		if err != nil {
			t.Fatal(err)
		}
		return engine.Deps{Interpreters: engine.PyenvInterpreters{Set: pythons}, Envs: engine.PyenvEnvironments{Resolver: res, Envs: envs}}
	})
}

func TestRealEngineRequirements(t *testing.T) {
	ts := newEnvServer(t)
	cs, progress := session(t, &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", MaxRetries: -1})
	params := &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{
		"code": "import tinyreq\nprint(tinyreq.VERSION)\n", "requirements": []string{"tinyreq==1.2"}}}
	params.SetProgressToken("install")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || !strings.Contains(textOf(res), "--- stdout ---\n1.2\n") {
		t.Fatalf("isError %v, text %q", res.IsError, textOf(res))
	}
	waitFor(t, progress, "install: ")
}
