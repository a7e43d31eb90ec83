package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/pyexec/pyexec/client"
)

// seenRequest is what the fake server saw of one request.
type seenRequest struct {
	method, path, query, auth string
	metadata                  map[string]any // multipart "metadata" part
	files                     []string       // names in the "tar" part
	body                      map[string]any // JSON body (eval)
}

// fakeAPI speaks the contract's endpoints with canned answers and records
// what the CLI sent.
type fakeAPI struct {
	t        *testing.T
	result   string // ExecutionResult JSON for sync, eval and GET
	events   string // body of GET .../events
	evStatus int    // status of GET .../events (200 when zero)
	kill     string // body of DELETE
	list     string // body of GET /api/v1/executions
	nodes    string // body of GET /api/v1/nodes

	mu   sync.Mutex
	seen []seenRequest
}

func (f *fakeAPI) start() string {
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	f.t.Cleanup(srv.Close)
	return srv.URL
}

func (f *fakeAPI) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	req := seenRequest{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, auth: r.Header.Get("Authorization")}
	if mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil && mt == "multipart/form-data" {
		mr := multipart.NewReader(r.Body, params["boundary"])
		for {
			p, err := mr.NextPart()
			if err != nil {
				break
			}
			data, _ := io.ReadAll(p)
			switch p.FormName() {
			case "metadata":
				if err := json.Unmarshal(data, &req.metadata); err != nil {
					f.t.Errorf("metadata is not JSON: %v", err)
				}
			case "tar":
				req.files = tarNames(f.t, data)
			}
		}
	} else if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		if len(b) > 0 {
			if err := json.Unmarshal(b, &req.body); err != nil {
				f.t.Errorf("body is not JSON: %v", err)
			}
		}
	}
	f.mu.Lock()
	f.seen = append(f.seen, req)
	f.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/exec/async":
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"execution_id":"exe_async"}`)
	case r.Method == http.MethodPost:
		io.WriteString(w, f.result)
	case r.Method == http.MethodDelete:
		io.WriteString(w, f.kill)
	case r.URL.Path == "/api/v1/executions":
		io.WriteString(w, f.list)
	case r.URL.Path == "/api/v1/nodes":
		io.WriteString(w, f.nodes)
	case strings.HasSuffix(r.URL.Path, "/events"):
		if f.evStatus != 0 && f.evStatus != http.StatusOK {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(f.evStatus)
			io.WriteString(w, "404 page not found")
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, f.events)
	case r.URL.Path == "/api/v1/executions/exe_missing":
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":"execution not found"}`)
	default:
		io.WriteString(w, f.result)
	}
}

// runCLI runs the CLI and returns its exit code, stdout and stderr.
func runCLI(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := execute(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

const (
	resOK      = `{"execution_id":"exe_1","status":"completed","exit_code":0,"stdout":"hello\n","duration_ms":15}`
	resRaise   = `{"execution_id":"exe_1","status":"completed","exit_code":1,"stdout":"before\n","stderr":"Traceback...\nNameError: name 'x' is not defined\n","error_type":"NameError","error_line":2,"duration_ms":9}`
	resExit3   = `{"execution_id":"exe_1","status":"completed","exit_code":3,"stdout":"out\n","stderr":"err\n"}`
	resTimeout = `{"execution_id":"exe_1","status":"failed","exit_code":137,"stdout":"partial\n","error":"execution timeout after 2s","reason":"timeout","timed_out":true,"duration_ms":2001}`
	resKilled  = `{"execution_id":"exe_1","status":"killed","exit_code":0,"stdout":"partial\n","reason":"killed"}`
	resInfra   = `{"execution_id":"exe_1","status":"failed","exit_code":0,"error":"sandbox setup failed: cgroup unavailable","reason":"setup_error"}`
	resEval    = `{"execution_id":"exe_1","status":"completed","exit_code":0,"stdout":"side effect\n","result":"4","duration_ms":3}`
)

func writeScript(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunOutputAndExitStatus(t *testing.T) {
	script := writeScript(t, "script.py", "print('hello')")
	tests := []struct {
		name       string
		result     string
		flags      []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"success", resOK, nil, 0, "hello\n", ""},
		{"python exception", resRaise, nil, 1, "before\n", "Traceback...\nNameError: name 'x' is not defined\n"},
		{"script exit code", resExit3, nil, 3, "out\n", "err\n"},
		{"timeout", resTimeout, nil, 124, "partial\n", "Error: execution timeout after 2s\n"},
		{"killed", resKilled, nil, 137, "partial\n", "Error: execution was killed\n"},
		{"infrastructure failure", resInfra, nil, 1, "", "Error: sandbox setup failed: cgroup unavailable\n"},
		{"verbose", resOK, []string{"-v"}, 0, "hello\n", "Execution ID: exe_1\nStatus: completed\nDuration: 15ms\n---\n"},
		{"verbose timeout", resTimeout, []string{"--verbose"}, 124, "partial\n",
			"Execution ID: exe_1\nStatus: failed\nDuration: 2001ms\n---\nError: execution timeout after 2s\n"},
		{"quiet prints only stdout", resRaise, []string{"-q"}, 1, "before\n", ""},
		{"quiet keeps the exit status", resTimeout, []string{"--quiet"}, 124, "partial\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &fakeAPI{t: t, result: tt.result}
			url := api.start()
			args := append([]string{"run", "--server", url, script}, tt.flags...)
			code, stdout, stderr := runCLI(args...)
			if code != tt.wantCode || stdout != tt.wantStdout || stderr != tt.wantStderr {
				t.Errorf("got exit %d, stdout %q, stderr %q\nwant exit %d, stdout %q, stderr %q",
					code, stdout, stderr, tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
		})
	}
}

func TestRunJSONPrintsTheRawResult(t *testing.T) {
	api := &fakeAPI{t: t, result: resTimeout}
	code, stdout, stderr := runCLI("run", "--server", api.start(), "--json", writeScript(t, "a.py", ""))
	if code != 124 || stderr != "" {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	var got, want map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
	}
	json.Unmarshal([]byte(resTimeout), &want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("JSON:\n got %v\nwant %v", got, want)
	}
}

func TestRunSendsTheRequest(t *testing.T) {
	t.Setenv("PYEXEC_TEST_TOKEN", "tok")
	t.Setenv("PYEXEC_API_KEY", "key-from-env")
	dir := t.TempDir()
	for name, content := range map[string]string{"app.py": "", "lib.py": "", "requirements.txt": "requests==2.32.0\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	api := &fakeAPI{t: t, result: resOK}
	code, _, stderr := runCLI("run", "--server", api.start(),
		"--file", filepath.Join(dir, "app.py"), "--file", filepath.Join(dir, "lib.py"),
		"--entrypoint", "app.py", "--requirements", filepath.Join(dir, "requirements.txt"),
		"-e", "PYEXEC_TEST_TOKEN", "--env", "MODE=fast",
		"--timeout", "30", "--memory", "256", "--disk", "64", "--cpu", "512", "--image", "python:3.11-slim",
		"--", "--model", "x", "-q")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	reqs := api.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.method != http.MethodPost || r.path != "/api/v1/exec/sync" || r.auth != "Bearer key-from-env" {
		t.Errorf("request = %s %s (auth %q)", r.method, r.path, r.auth)
	}
	if !reflect.DeepEqual(r.files, []string{"app.py", "lib.py"}) {
		t.Errorf("uploaded %v", r.files)
	}
	want := map[string]any{
		"entrypoint":       "app.py",
		"docker_image":     "python:3.11-slim",
		"requirements_txt": "requests==2.32.0\n",
		"env_vars":         []any{"PYEXEC_TEST_TOKEN=tok", "MODE=fast"},
		"script_args":      []any{"--model", "x", "-q"},
		"config": map[string]any{
			"timeout_seconds": 30.0, "memory_mb": 256.0, "disk_mb": 64.0, "cpu_shares": 512.0, "network_disabled": true,
		},
	}
	if !reflect.DeepEqual(r.metadata, want) {
		t.Errorf("metadata:\n got %v\nwant %v", r.metadata, want)
	}
}

func TestRunFlagsBeforeTheCommandAndEnvironment(t *testing.T) {
	api := &fakeAPI{t: t, result: resOK}
	t.Setenv("PYEXEC_SERVER", api.start())
	script := writeScript(t, "job.py", "")
	code, stdout, stderr := runCLI("run", script, "--network")
	if code != 0 || stdout != "hello\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	r := api.requests()[0]
	if r.metadata["entrypoint"] != "job.py" {
		t.Errorf("entrypoint = %v, want the single file", r.metadata["entrypoint"])
	}
	if cfg := r.metadata["config"].(map[string]any); cfg["network_disabled"] != false {
		t.Errorf("config = %v, want network_disabled false with --network", cfg)
	}
	if r.auth != "" {
		t.Errorf("Authorization sent without a key: %q", r.auth)
	}
	if code, _, stderr := runCLI("run", script, "--network-allow", "pypi.org:443,*.pythonhosted.org"); code != 0 {
		t.Fatalf("--network-allow: exit %d: %s", code, stderr)
	}
	cfg := api.requests()[1].metadata["config"].(map[string]any)
	if net, _ := cfg["network"].(map[string]any); cfg["network_disabled"] != false || net == nil ||
		fmt.Sprint(net["allow"]) != "[pypi.org:443 *.pythonhosted.org]" {
		t.Errorf("config = %v, want network with the allow list", cfg)
	}
	// python-executor's documented form: the server flag before the command.
	if code, _, stderr := runCLI("--server", os.Getenv("PYEXEC_SERVER"), "run", script); code != 0 {
		t.Errorf("--server before run: exit %d: %s", code, stderr)
	}
	// Boolean global flags before the command, too.
	if code, _, stderr := runCLI("-q", "-v", "--server", os.Getenv("PYEXEC_SERVER"), "run", script); code != 0 {
		t.Errorf("-q -v before run: exit %d: %s", code, stderr)
	}
}

func TestRunClientErrors(t *testing.T) {
	api := &fakeAPI{t: t, result: resOK}
	url := api.start()
	script := writeScript(t, "a.py", "")
	notes := writeScript(t, "notes.txt", "")
	tests := []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{"unset env variable", []string{"run", "--server", url, script, "-e", "PYEXEC_SURELY_UNSET_VAR"}, "Error: environment variable PYEXEC_SURELY_UNSET_VAR is not set\n"},
		{"missing file", []string{"run", "--server", url, filepath.Join(t.TempDir(), "x.py")}, "no such file"},
		{"no python file", []string{"run", "--server", url, "--file", notes}, "use --entrypoint"},
		{"negative limit", []string{"run", "--server", url, "--memory", "-1", script}, "--memory must not be negative"},
		{"unreachable server", []string{"run", "--server", "http://127.0.0.1:1", script}, "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(tt.args...)
			if code != 1 || stdout != "" || !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and %q", code, stdout, stderr, tt.wantStderr)
			}
		})
	}
	if n := len(api.requests()); n != 0 {
		t.Errorf("%d requests sent for invalid invocations", n)
	}
}

func TestSubmitAndRunAsyncPrintTheID(t *testing.T) {
	script := writeScript(t, "a.py", "")
	for _, args := range [][]string{{"submit", script}, {"run", "--async", script}} {
		t.Run(args[0], func(t *testing.T) {
			api := &fakeAPI{t: t}
			code, stdout, stderr := runCLI(append(args, "--server", api.start())...)
			if code != 0 || stdout != "exe_async\n" || stderr != "" {
				t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
			}
			if r := api.requests()[0]; r.path != "/api/v1/exec/async" || r.metadata["entrypoint"] != "a.py" {
				t.Errorf("request %s with %v", r.path, r.metadata)
			}
		})
	}
}

func TestEval(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantBody   map[string]any
		wantStdout string
	}{
		{"result after stdout", []string{"2+2"},
			map[string]any{"code": "2+2", "eval_last_expr": true, "config": map[string]any{"network_disabled": true}},
			"side effect\n4\n"},
		{"quiet prints the result only", []string{"-q", "--python", "3.11", "--timeout", "5", "2+2"},
			map[string]any{"code": "2+2", "eval_last_expr": true, "python_version": "3.11", "config": map[string]any{"network_disabled": true, "timeout_seconds": 5.0}},
			"4\n"},
		{"no result", []string{"--no-result", "2+2"},
			map[string]any{"code": "2+2", "config": map[string]any{"network_disabled": true}},
			"side effect\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &fakeAPI{t: t, result: resEval}
			code, stdout, stderr := runCLI(append([]string{"eval", "--server", api.start()}, tt.args...)...)
			if code != 0 || stdout != tt.wantStdout || stderr != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want stdout %q", code, stdout, stderr, tt.wantStdout)
			}
			r := api.requests()[0]
			if r.path != "/api/v1/eval" || !reflect.DeepEqual(r.body, tt.wantBody) {
				t.Errorf("request %s body:\n got %v\nwant %v", r.path, r.body, tt.wantBody)
			}
		})
	}
	t.Run("async is refused", func(t *testing.T) {
		code, _, stderr := runCLI("eval", "--async", "--server", "http://127.0.0.1:1", "1")
		if code != 1 || !strings.Contains(stderr, "use submit") {
			t.Errorf("exit %d, stderr %q", code, stderr)
		}
	})
}

// sse renders one event as the server sends it.
func sse(seq int, typ, data string) string {
	payload, _ := json.Marshal(map[string]any{"seq": seq, "type": typ, "data": data, "time": "2026-01-02T03:04:05Z"})
	return "id: " + strconv.Itoa(seq) + "\nevent: " + typ + "\ndata: " + string(payload) + "\n\n"
}

func TestFollow(t *testing.T) {
	stream := sse(1, "status", "running") + ": heartbeat\n\n" + sse(2, "stdout", "line 1\n") +
		sse(3, "stderr", "warning\n") + sse(4, "stdout", "line 2\n") + sse(5, "status", "failed")
	tests := []struct {
		name       string
		events     string
		evStatus   int
		result     string
		flags      []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"streams then exits with the result's status", stream, 0, resTimeout, nil,
			124, "line 1\nline 2\n", "warning\nError: execution timeout after 2s\n"},
		{"quiet streams stdout only", stream, 0, resTimeout, []string{"-q"},
			124, "line 1\nline 2\n", ""},
		{"verbose", stream, 0, resTimeout, []string{"-v"},
			124, "line 1\nline 2\n", "Execution ID: exe_1\n---\nwarning\n---\nStatus: failed\nDuration: 2001ms\nError: execution timeout after 2s\n"},
		{"server without events polls", "", http.StatusNotFound, resExit3, nil,
			3, "out\n", "err\n"},
		{"stream cut short", sse(1, "stdout", "x\n"), 0, resOK, nil,
			1, "x\n", "Error: following exe_1: event stream ended before the execution finished\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &fakeAPI{t: t, events: tt.events, evStatus: tt.evStatus, result: tt.result}
			code, stdout, stderr := runCLI(append([]string{"follow", "--server", api.start(), "exe_1"}, tt.flags...)...)
			if code != tt.wantCode || stdout != tt.wantStdout || stderr != tt.wantStderr {
				t.Errorf("got exit %d, stdout %q, stderr %q\nwant exit %d, stdout %q, stderr %q",
					code, stdout, stderr, tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
		})
	}
	t.Run("unknown execution", func(t *testing.T) {
		api := &fakeAPI{t: t, evStatus: http.StatusNotFound}
		code, _, stderr := runCLI("follow", "--server", api.start(), "exe_missing")
		if code != 1 || stderr != "Error: execution not found (HTTP 404)\n" {
			t.Errorf("exit %d, stderr %q", code, stderr)
		}
	})
}

func TestKill(t *testing.T) {
	tests := []struct {
		name, body, wantStdout string
	}{
		{"running", `{"status":"killed"}`, "Execution killed\n"},
		{"already finished", `{"status":"completed"}`, "Execution exe_1 was not running (status: completed)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &fakeAPI{t: t, kill: tt.body}
			code, stdout, _ := runCLI("kill", "--server", api.start(), "exe_1")
			if code != 0 || stdout != tt.wantStdout {
				t.Errorf("exit %d, stdout %q; want %q", code, stdout, tt.wantStdout)
			}
			if r := api.requests()[0]; r.method != http.MethodDelete || r.path != "/api/v1/executions/exe_1" {
				t.Errorf("request %s %s", r.method, r.path)
			}
		})
	}
}

func TestExecutionsList(t *testing.T) {
	list := `{"executions":[` +
		`{"execution_id":"exe_b","status":"running","exit_code":0,"created_at":"2026-01-02T03:04:05Z"},` +
		`{"execution_id":"exe_a","status":"failed","exit_code":137,"reason":"timeout","duration_ms":2000,"created_at":"2026-01-02T03:00:00Z"}` +
		`],"next_cursor":"c2"}`
	t.Run("table", func(t *testing.T) {
		api := &fakeAPI{t: t, list: list}
		code, stdout, stderr := runCLI("executions", "list", "--server", api.start(), "--status", "failed", "--limit", "2")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "EXECUTION ID") ||
			!strings.Contains(lines[1], "exe_b") || !strings.Contains(lines[2], "failed (timeout)") || !strings.Contains(lines[2], "2s") {
			t.Errorf("table:\n%s", stdout)
		}
		if stderr != "more: pyexec executions list --cursor c2\n" {
			t.Errorf("stderr %q", stderr)
		}
		if r := api.requests()[0]; r.path != "/api/v1/executions" || r.query != "limit=2&status=failed" {
			t.Errorf("request %s?%s", r.path, r.query)
		}
	})
	t.Run("quiet lists IDs", func(t *testing.T) {
		api := &fakeAPI{t: t, list: list}
		if code, stdout, _ := runCLI("executions", "list", "-q", "--server", api.start()); code != 0 || stdout != "exe_b\nexe_a\n" {
			t.Errorf("exit %d, stdout %q", code, stdout)
		}
	})
	t.Run("bad status", func(t *testing.T) {
		if code, _, stderr := runCLI("executions", "list", "--status", "done"); code != 1 || !strings.Contains(stderr, "invalid --status") {
			t.Errorf("exit %d, stderr %q", code, stderr)
		}
	})
}

func TestAPIErrorsArePrintedWithTheServerMessage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":"server is at capacity"}`)
	}))
	defer srv.Close()
	code, stdout, stderr := runCLI("eval", "--server", srv.URL, "1")
	if code != 1 || stdout != "" || stderr != "Error: server is at capacity (HTTP 429)\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestShellCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		t.Run(shell, func(t *testing.T) {
			code, stdout, _ := runCLI("completion", shell)
			if code != 0 || !strings.Contains(stdout, "pyexec") {
				t.Errorf("exit %d, %d bytes", code, len(stdout))
			}
		})
	}
	t.Run("execution IDs", func(t *testing.T) {
		api := &fakeAPI{t: t, list: `{"executions":[{"execution_id":"exe_r","status":"running","exit_code":0}]}`}
		code, stdout, _ := runCLI("__complete", "kill", "--server", api.start(), "")
		if code != 0 || !strings.Contains(stdout, "exe_r\trunning") {
			t.Errorf("exit %d, completions %q", code, stdout)
		}
		if r := api.requests()[0]; r.query != "limit=50&status=running" {
			t.Errorf("query %q", r.query)
		}
	})
}

func TestNodesList(t *testing.T) {
	nodes := `{"nodes":[` +
		`{"name":"a","instance":"i1","version":"v1.0.0","started_at":"2026-01-02T03:04:05Z","heartbeat_at":"2026-01-02T03:05:05Z",` +
		`"draining":false,"capacity":4,"running":2,"queued":1,"queue_size":100,"sessions":1,"session_capacity":32,"warm_jails":3,"cpus":8,"load1":1.5},` +
		`{"name":"b","instance":"i2","started_at":"2026-01-02T03:04:05Z","heartbeat_at":"2026-01-02T03:05:05Z",` +
		`"draining":true,"capacity":2,"running":0,"queued":0,"queue_size":8,"sessions":0,"session_capacity":32,"cpus":2,"load1":0}]}`
	t.Run("table", func(t *testing.T) {
		api := &fakeAPI{t: t, nodes: nodes}
		code, stdout, stderr := runCLI("nodes", "--server", api.start())
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "NODE") ||
			!strings.Contains(lines[1], "ready") || !strings.Contains(lines[1], "2/4") || !strings.Contains(lines[1], "1.50/8") ||
			!strings.Contains(lines[2], "draining") || !strings.Contains(lines[2], " - ") {
			t.Errorf("table:\n%s", stdout)
		}
		if r := api.requests()[0]; r.method != http.MethodGet || r.path != "/api/v1/nodes" {
			t.Errorf("request %s %s", r.method, r.path)
		}
	})
	t.Run("json", func(t *testing.T) {
		api := &fakeAPI{t: t, nodes: nodes}
		code, stdout, _ := runCLI("nodes", "--json", "--server", api.start())
		var got client.NodeList
		if err := json.Unmarshal([]byte(stdout), &got); code != 0 || err != nil || len(got.Nodes) != 2 ||
			got.Nodes[0].WarmJails == nil || *got.Nodes[0].WarmJails != 3 || !got.Nodes[1].Draining {
			t.Errorf("exit %d, stdout %s (%v)", code, stdout, err)
		}
	})
	t.Run("quiet lists names", func(t *testing.T) {
		api := &fakeAPI{t: t, nodes: nodes}
		if code, stdout, _ := runCLI("nodes", "-q", "--server", api.start()); code != 0 || stdout != "a\nb\n" {
			t.Errorf("exit %d, stdout %q", code, stdout)
		}
	})
}
