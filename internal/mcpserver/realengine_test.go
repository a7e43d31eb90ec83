package mcpserver_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/client"
	"github.com/pyexec/pyexec/internal/api"
	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/engine/enginetest"
	"github.com/pyexec/pyexec/internal/mcpserver"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/store"
)

// testKey is the API key of the authenticated test server.
const testKey = "mcp-test-key-0123456789"

// TestMain lets the test binary serve as the jail's init.
func TestMain(m *testing.M) {
	if sandbox.IsInit() {
		os.Exit(sandbox.Init())
	}
	os.Exit(m.Run())
}

// newRealServer serves the HTTP API, /mcp included, over the real engine:
// embedded JetStream in a temporary directory, real jails and
// interpreters. keys, if any, are the server's API keys.
func newRealServer(t *testing.T, keys ...string) *httptest.Server {
	t.Helper()
	eng := enginetest.Start(t, engine.Config{Concurrency: 2, QueueSize: 2, DefaultTimeout: 20 * time.Second},
		func(_ *store.NATS, jails *sandbox.Manager) engine.Deps { return engine.Deps{Jails: jails} })
	c := config.Default()
	c.MaxConcurrency, c.QueueSize = 2, 2
	c.APIKeys = keys
	return serveAPI(t, eng, c)
}

// serveAPI serves the HTTP API, /mcp included, over eng until the test ends.
func serveAPI(t *testing.T, eng *engine.Engine, c config.Config) *httptest.Server {
	t.Helper()
	s, err := api.New(eng, api.Options{Config: c, Version: "test", Isolation: "jail"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// bearer adds an API key to every request.
type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// session connects an MCP client to t; progress messages go to the
// returned channel.
func session(t *testing.T, tr mcp.Transport) (*mcp.ClientSession, <-chan string) {
	t.Helper()
	progress := make(chan string, 1000)
	c := mcp.NewClient(&mcp.Implementation{Name: "pyexec-test"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			select {
			case progress <- r.Params.Message:
			default:
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, progress
}

func textOf(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// stdioTransport runs an MCP server over newline-delimited JSON on pipes,
// as `pyexec mcp` does on stdin and stdout, with b as its backend.
func stdioTransport(t *testing.T, b mcpserver.Backend) mcp.Transport {
	t.Helper()
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		mcpserver.New(b, mcpserver.Options{}).Run(ctx, &mcp.IOTransport{Reader: serverIn, Writer: serverOut})
	}()
	t.Cleanup(func() {
		cancel()
		clientOut.Close()
		<-done
	})
	return &mcp.IOTransport{Reader: clientIn, Writer: clientOut}
}

func TestRealEngine(t *testing.T) {
	ts := newRealServer(t)
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
	api := client.New(ts.URL)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			cs, progress := session(t, tr.make(t))
			ctx := context.Background()

			t.Run("lists run_python", func(t *testing.T) {
				res, err := cs.ListTools(ctx, nil)
				if err != nil || !slices.ContainsFunc(res.Tools, func(t *mcp.Tool) bool { return t.Name == "run_python" }) {
					t.Fatalf("tools %+v, err %v", res, err)
				}
			})

			t.Run("a session keeps its variables across run_python calls", func(t *testing.T) {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_session", Arguments: map[string]any{}})
				if err != nil || res.IsError {
					t.Fatalf("create_session: %v %q", err, textOf(res))
				}
				id := res.StructuredContent.(map[string]any)["session_id"].(string)
				for i, code := range []string{"x = 20", "x += 1", "x * 2"} {
					res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": code, "session_id": id}})
					if err != nil || res.IsError {
						t.Fatalf("cell %d: %v %q", i+1, err, textOf(res))
					}
				}
				if !strings.Contains(textOf(res), "value: 42") {
					t.Errorf("last cell: %q", textOf(res))
				}
				res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "close_session", Arguments: map[string]any{"session_id": id}})
				if err != nil || res.IsError {
					t.Fatalf("close_session: %v %q", err, textOf(res))
				}
			})

			t.Run("runs code with files and returns its output", func(t *testing.T) {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{
					"code":  "import helper\nprint(helper.double(21))",
					"files": []map[string]string{{"path": "helper.py", "content": "def double(x):\n    return 2 * x\n"}},
				}})
				if err != nil {
					t.Fatal(err)
				}
				if res.IsError || !strings.Contains(textOf(res), "--- stdout ---\n42\n") {
					t.Fatalf("isError %v, text %q", res.IsError, textOf(res))
				}
			})

			t.Run("an exception is an error result with the traceback", func(t *testing.T) {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "x = 1\nundefined_name\n"}})
				if err != nil {
					t.Fatalf("protocol error %v", err)
				}
				txt := textOf(res)
				if !res.IsError || !strings.Contains(txt, "Traceback") || !strings.Contains(txt, "NameError") || !strings.Contains(txt, "(line 2)") {
					t.Fatalf("isError %v, text %q", res.IsError, txt)
				}
			})

			t.Run("an unknown python version is an error result naming the versions", func(t *testing.T) {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "pass", "python_version": "3.99"}})
				if err != nil {
					t.Fatalf("protocol error %v", err)
				}
				if !res.IsError || !strings.Contains(textOf(res), "supported versions") {
					t.Fatalf("isError %v, text %q", res.IsError, textOf(res))
				}
			})

			t.Run("canceling the call kills the run, after progress", func(t *testing.T) {
				cctx, cancel := context.WithCancel(ctx)
				defer cancel()
				params := &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{
					"code": "import time\nprint('tick', flush=True)\nwhile True:\n    time.sleep(0.05)\n"}}
				params.SetProgressToken("cancel-me")
				errc := make(chan error, 1)
				go func() {
					_, err := cs.CallTool(cctx, params)
					errc <- err
				}()
				waitFor(t, progress, "tick")
				cancel()
				if err := <-errc; err == nil {
					t.Fatal("a canceled call returned no error")
				}
				waitKilled(t, api)
			})
		})
	}
}

// waitFor reads progress messages until one contains want.
func waitFor(t *testing.T, progress <-chan string, want string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case m := <-progress:
			if strings.Contains(m, want) {
				return
			}
		case <-timeout:
			t.Fatalf("no progress message containing %q", want)
		}
	}
}

// waitKilled waits until the most recent execution is killed.
func waitKilled(t *testing.T, api *client.Client) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		list, err := api.ListExecutions(context.Background(), client.ListOptions{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Executions) == 1 && list.Executions[0].Status == client.StatusKilled {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run was not killed: %+v", list.Executions)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestRealEngineAuth(t *testing.T) {
	ts := newRealServer(t, "ci:"+testKey)

	t.Run("/mcp without a key is refused", func(t *testing.T) {
		resp, err := http.Post(ts.URL+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", resp.StatusCode)
		}
	})

	t.Run("/mcp with a key runs code", func(t *testing.T) {
		hc := &http.Client{Transport: bearer{testKey}}
		cs, _ := session(t, &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", HTTPClient: hc, MaxRetries: -1})
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "print('authorized')"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError || !strings.Contains(textOf(res), "authorized") {
			t.Fatalf("isError %v, text %q", res.IsError, textOf(res))
		}
	})
}
