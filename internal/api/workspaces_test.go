package api

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/engine/enginetest"
)

// The workspace tests run real jails with workspaces through the API
// (tenancyServer): what one run writes in /workspace, the next one and the
// file routes read; another key sees nothing; a run that is stopped, or
// two at once, leave every file accounted for.

// wsEval runs code as key with config (a JSON object) and returns the
// status and the decoded result.
func wsEval(t *testing.T, ts *httptest.Server, key, code, config string) (int, ExecutionResult, []byte) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"code": code, "config": json.RawMessage(config)})
	if err != nil {
		t.Fatal(err)
	}
	status, _, out := call(t, ts, http.MethodPost, "/api/v1/eval", "application/json", body, keyHeader(key))
	var res ExecutionResult
	if status == http.StatusOK {
		res = decode[ExecutionResult](t, out)
	}
	return status, res, out
}

// keyHeader is the header of a request made with key; none for "" (a
// server without keys).
func keyHeader(key string) map[string]string {
	if key == "" {
		return nil
	}
	return as(key)
}

// createWorkspace makes workspace name for key.
func createWorkspace(t *testing.T, ts *httptest.Server, key, name string) {
	t.Helper()
	code, _, body := call(t, ts, http.MethodPost, "/api/v1/workspaces", "application/json",
		[]byte(`{"name":"`+name+`","quota_mb":16}`), keyHeader(key))
	if code != http.StatusCreated {
		t.Fatalf("creating workspace %s: %d %s", name, code, body)
	}
}

func TestWorkspaceOutlivesRuns(t *testing.T) {
	ts := tenancyServer(t)
	createWorkspace(t, ts, keyA, "proj")

	code, res, body := wsEval(t, ts, keyA,
		"import os\nos.makedirs('/workspace/data', exist_ok=True)\nopen('/workspace/data/notes.txt', 'w').write('written by run 1')\nprint('ok')",
		`{"workspace":"proj"}`)
	if code != 200 || res.Status != "completed" || res.Workspace == nil || res.Workspace.Version != 1 || !res.Workspace.Changed {
		t.Fatalf("run 1: %d %s", code, body)
	}

	code, res, body = wsEval(t, ts, keyA, "print(open('/workspace/data/notes.txt').read())", `{"workspace":"proj","workspace_mode":"ro"}`)
	if code != 200 || strings.TrimSpace(res.Stdout) != "written by run 1" {
		t.Fatalf("run 2 reads: %d %s", code, body)
	}
	if res.Workspace == nil || res.Workspace.Version != 1 || res.Workspace.Mode != "ro" {
		t.Errorf("a read-only run: workspace %+v, want version 1 (ro)", res.Workspace)
	}
	code, res, body = wsEval(t, ts, keyA, "open('/workspace/x', 'w').write('no')", `{"workspace":"proj","workspace_mode":"ro"}`)
	if code != 200 || res.Status != "completed" || res.ExitCode == 0 || !strings.Contains(res.Stderr, "Read-only file system") {
		t.Errorf("a write to a read-only workspace: %d %s", code, body)
	}

	code, _, file := call(t, ts, http.MethodGet, "/api/v1/workspaces/proj/files/data/notes.txt", "", nil, as(keyA))
	if code != 200 || string(file) != "written by run 1" {
		t.Errorf("the file through the API: %d %q", code, file)
	}
	code, _, body = call(t, ts, http.MethodPut, "/api/v1/workspaces/proj/files/data/from-api.txt", "application/octet-stream",
		[]byte("written through the API"), as(keyA))
	if code != 200 {
		t.Fatalf("writing a file: %d %s", code, body)
	}
	code, res, body = wsEval(t, ts, keyA, "print(open('/workspace/data/from-api.txt').read())", `{"workspace":"proj"}`)
	if code != 200 || strings.TrimSpace(res.Stdout) != "written through the API" {
		t.Errorf("a run reads what the API wrote: %d %s", code, body)
	}
	code, _, body = call(t, ts, http.MethodGet, "/api/v1/workspaces/proj", "", nil, as(keyA))
	if code != 200 || decode[map[string]any](t, body)["version"] != float64(2) {
		t.Errorf("the workspace after a run that only read: %d %s, want version 2", code, body)
	}

	t.Run("another key", func(t *testing.T) {
		for _, p := range []string{"/api/v1/workspaces/proj", "/api/v1/workspaces/proj/files/data/notes.txt"} {
			code, _, body := call(t, ts, http.MethodGet, p, "", nil, as(keyB))
			wantCode, _, want := call(t, ts, http.MethodGet, strings.Replace(p, "proj", "nope", 1), "", nil, as(keyB))
			if code != http.StatusNotFound || wantCode != code || string(body) != string(want) {
				t.Errorf("b: GET %s: %d %s; an unknown workspace: %d %s", p, code, body, wantCode, want)
			}
		}
		code, _, body := wsEval(t, ts, keyB, "print(open('/workspace/data/notes.txt').read())", `{"workspace":"proj"}`)
		wantCode, _, want := wsEval(t, ts, keyB, "print(1)", `{"workspace":"nope"}`)
		if code != http.StatusNotFound || wantCode != code || string(body) != string(want) || strings.Contains(string(body), "run 1") {
			t.Errorf("b runs on a's workspace: %d %s; on an unknown one: %d %s", code, body, wantCode, want)
		}
	})
}

func TestWorkspaceRunStoppedMidWrite(t *testing.T) {
	ts := tenancyServer(t)
	createWorkspace(t, ts, keyA, "w")
	if code, res, body := wsEval(t, ts, keyA, "open('/workspace/a.txt', 'w').write('one')", `{"workspace":"w"}`); code != 200 || res.Workspace == nil || res.Workspace.Version != 1 {
		t.Fatalf("run 1: %d %s", code, body)
	}
	// Run 2 writes b.txt, then rewrites a.txt without end until its time is up.
	code, res, body := wsEval(t, ts, keyA, `import time
open('/workspace/b.txt', 'w').write('two')
f = open('/workspace/a.txt', 'w')
while True:
    f.write('partial ' * 100)
    f.flush()
    time.sleep(0.01)
`, `{"workspace":"w","timeout_seconds":2}`)
	if code != 200 || res.Reason != "timeout" || res.Workspace == nil {
		t.Fatalf("run 2: %d %s", code, body)
	}
	if res.Workspace.Error != "" || res.Workspace.Version != 2 || res.Workspace.Base != 1 {
		t.Fatalf("run 2's workspace: %+v, want version 2 made from 1", res.Workspace)
	}
	// The version the run made holds what it had written when it died; the
	// one before is kept as it was and can be read and restored.
	get := func(p string) (int, string) {
		code, _, body := call(t, ts, http.MethodGet, "/api/v1/workspaces/w/files/"+p, "", nil, as(keyA))
		return code, string(body)
	}
	if code, b := get("b.txt"); code != 200 || b != "two" {
		t.Errorf("b.txt after the timeout: %d %q", code, b)
	}
	if code, a := get("a.txt"); code != 200 || strings.Trim(strings.ReplaceAll(a, "partial ", ""), " ") != "" {
		t.Errorf("a.txt after the timeout: %d, %d bytes not all written by run 2", code, len(a))
	}
	if code, a := get("a.txt?version=1"); code != 200 || a != "one" {
		t.Errorf("a.txt of version 1: %d %q", code, a)
	}
	if code, b := get("b.txt?version=1"); code != 404 {
		t.Errorf("b.txt of version 1: %d %q, want none", code, b)
	}
	code, _, body = call(t, ts, http.MethodPost, "/api/v1/workspaces/w/restore", "application/json", []byte(`{"version":1}`), as(keyA))
	if code != 200 || decode[map[string]any](t, body)["version"] != float64(3) {
		t.Fatalf("restore: %d %s", code, body)
	}
	if code, res, body := wsEval(t, ts, keyA, "import os\nprint(open('/workspace/a.txt').read(), os.path.exists('/workspace/b.txt'))", `{"workspace":"w"}`); code != 200 || strings.TrimSpace(res.Stdout) != "one False" {
		t.Errorf("after restoring version 1: %d %s", code, body)
	}
}

// TestWorkspaceConcurrentWriters: two runs at once on one workspace each
// write a file of their own and the same shared file. Both commit; the one
// that commits second is told of the conflict on the shared file, and its
// content is kept beside it: no file either wrote is lost.
func TestWorkspaceConcurrentWriters(t *testing.T) {
	ts := tenancyServer(t)
	createWorkspace(t, ts, keyA, "both")
	var wg sync.WaitGroup
	results := make([]ExecutionResult, 2)
	for i := range results {
		wg.Go(func() {
			me := string(rune('a' + i))
			code, res, body := wsEval(t, ts, keyA, `import time
open('/workspace/own-`+me+`.txt', 'w').write('`+me+`')
open('/workspace/shared.txt', 'w').write('from `+me+`')
time.sleep(3)
`, `{"workspace":"both"}`)
			if code != 200 || res.Status != "completed" || res.ExitCode != 0 || res.Workspace == nil || res.Workspace.Error != "" {
				t.Errorf("writer %s: %d %s", me, code, body)
			}
			results[i] = res
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var conflicted []ExecutionResult
	for _, r := range results {
		if len(r.Workspace.Conflicts) > 0 {
			conflicted = append(conflicted, r)
		}
	}
	if len(conflicted) != 1 {
		t.Fatalf("conflicts reported to %d writers, want 1: %+v / %+v", len(conflicted), results[0].Workspace, results[1].Workspace)
	}
	c := conflicted[0].Workspace.Conflicts
	if len(c) != 1 || c[0].Path != "shared.txt" || c[0].KeptAs == "" {
		t.Fatalf("conflicts: %+v, want shared.txt kept beside it", c)
	}
	get := func(p string) string {
		code, _, body := call(t, ts, http.MethodGet, "/api/v1/workspaces/both/files/"+p, "", nil, as(keyA))
		if code != 200 {
			t.Errorf("GET %s: %d %s", p, code, body)
		}
		return string(body)
	}
	if get("own-a.txt") != "a" || get("own-b.txt") != "b" {
		t.Error("a writer's own file is lost")
	}
	shared, kept := get("shared.txt"), get(c[0].KeptAs)
	if shared == kept || !strings.HasPrefix(shared, "from ") || !strings.HasPrefix(kept, "from ") {
		t.Errorf("shared.txt %q and the conflict's copy %q: want one writer's each", shared, kept)
	}
	code, _, body := call(t, ts, http.MethodGet, "/api/v1/workspaces/both", "", nil, as(keyA))
	if code != 200 || decode[map[string]any](t, body)["version"] != float64(2) {
		t.Errorf("the workspace after two writers: %d %s, want version 2", code, body)
	}
}

// TestWorkspaceSession: a session created with a workspace sees its files,
// keeps its changes across a restart, and leaves them to the next run
// when it ends; another key cannot create a session on it.
func TestWorkspaceSession(t *testing.T) {
	ts := tenancyServer(t)
	createWorkspace(t, ts, keyA, "nb")
	if code, _, body := call(t, ts, http.MethodPut, "/api/v1/workspaces/nb/files/seed.txt", "application/octet-stream", []byte("seed"), as(keyA)); code != 200 {
		t.Fatalf("seed: %d %s", code, body)
	}
	js := "application/json"
	code, _, body := call(t, ts, http.MethodPost, "/api/v1/sessions", js, []byte(`{"workspace":"nb"}`), as(keyA))
	if code != http.StatusCreated {
		t.Fatalf("session: %d %s", code, body)
	}
	sid := decode[SessionInfo](t, body).SessionID
	cell := func(code string) string {
		t.Helper()
		b, _ := json.Marshal(map[string]string{"code": code})
		status, _, out := call(t, ts, http.MethodPost, "/api/v1/sessions/"+sid+"/execute", js, b, as(keyA))
		res := decode[CellResult](t, out)
		if status != 200 || res.ExitCode != 0 {
			t.Fatalf("cell %q: %d %s", code, status, out)
		}
		return strings.TrimSpace(res.Stdout)
	}
	if got := cell("print(open('/workspace/seed.txt').read())\nopen('/workspace/cell.txt', 'w').write('from the session')"); got != "seed" {
		t.Errorf("the session reads %q, want seed", got)
	}
	if code, _, body := call(t, ts, http.MethodPost, "/api/v1/sessions/"+sid+"/restart", js, nil, as(keyA)); code != 200 {
		t.Fatalf("restart: %d %s", code, body)
	}
	if got := cell("print(open('/workspace/cell.txt').read())"); got != "from the session" {
		t.Errorf("after a restart the session reads %q", got)
	}
	if code, _, body := call(t, ts, http.MethodDelete, "/api/v1/sessions/"+sid, "", nil, as(keyA)); code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, body)
	}
	if code, res, body := wsEval(t, ts, keyA, "print(open('/workspace/cell.txt').read())", `{"workspace":"nb","workspace_mode":"ro"}`); code != 200 || strings.TrimSpace(res.Stdout) != "from the session" || res.Workspace.Version != 2 {
		t.Errorf("the next run after the session: %d %s", code, body)
	}
	code, _, body = call(t, ts, http.MethodPost, "/api/v1/sessions", js, []byte(`{"workspace":"nb"}`), as(keyB))
	wantCode, _, want := call(t, ts, http.MethodPost, "/api/v1/sessions", js, []byte(`{"workspace":"nope"}`), as(keyB))
	if code != http.StatusNotFound || code != wantCode || string(body) != string(want) {
		t.Errorf("b's session on a's workspace: %d %s; on an unknown one: %d %s", code, body, wantCode, want)
	}
}

// TestWorkspaceUsage: /metrics (behind a key) counts the workspaces and
// the bytes of their current versions; the open /health says only that
// they work.
func TestWorkspaceUsage(t *testing.T) {
	ts := tenancyServer(t)
	createWorkspace(t, ts, keyA, "one")
	createWorkspace(t, ts, keyB, "two")
	data := strings.Repeat("x", 5000)
	if code, _, body := call(t, ts, http.MethodPut, "/api/v1/workspaces/one/files/big.txt", "application/octet-stream", []byte(data), as(keyA)); code != 200 {
		t.Fatalf("write: %d %s", code, body)
	}
	code, _, body := call(t, ts, http.MethodGet, "/health", "", nil, nil)
	var h struct {
		Workspaces *workspacesHealth `json:"workspaces"`
	}
	if err := json.Unmarshal(body, &h); code != 200 || err != nil || h.Workspaces == nil {
		t.Fatalf("health: %d %s", code, body)
	}
	if w := h.Workspaces; w.State != "ok" || w.Error != "" {
		t.Errorf("health's workspaces: %+v, want ok", *w)
	}
	// Anyone may read /health: it counts nothing of any key's workspaces.
	for _, leak := range []string{`"bytes"`, `"store_bytes"`, `"cache_bytes"`, `"mounts"`, `"workspaces":2`} {
		if strings.Contains(string(body), leak) {
			t.Errorf("/health shows %s: %s", leak, body)
		}
	}
	code, _, body = call(t, ts, http.MethodGet, "/metrics", "", nil, as(keyA))
	for _, want := range []string{"pyexec_workspaces 2\n", "pyexec_workspace_bytes 5000\n", "pyexec_workspace_mounts 0\n",
		"pyexec_workspace_trees_built_total 0\n", "pyexec_workspace_trees_derived_total 0\n"} {
		if code != 200 || !strings.Contains(string(body), want) {
			t.Errorf("metrics: %d, no %q", code, strings.TrimSpace(want))
		}
	}
	// A run mounts version 1: its tree is built whole. Its commit derives
	// version 2's from it, and the next run mounts that one as it is.
	for i, code := range []string{"open('/workspace/n.txt', 'w').write('1')", "print(open('/workspace/n.txt').read())"} {
		if status, res, out := wsEval(t, ts, keyA, code, `{"workspace":"one"}`); status != 200 || res.ExitCode != 0 {
			t.Fatalf("run %d: %d %s", i, status, out)
		}
	}
	code, _, body = call(t, ts, http.MethodGet, "/metrics", "", nil, as(keyA))
	for _, want := range []string{"pyexec_workspace_trees_built_total 1\n", "pyexec_workspace_trees_derived_total 1\n"} {
		if code != 200 || !strings.Contains(string(body), want) {
			t.Errorf("metrics after two runs: %d, no %q", code, strings.TrimSpace(want))
		}
	}
}

// TestWorkspaceRunKilled: an async run with a workspace killed while it
// sleeps after writing a file: the kill is recorded, and so is the commit
// of what the run had written, which the workspace then holds.
func TestWorkspaceRunKilled(t *testing.T) {
	ts := tenancyServer(t)
	createWorkspace(t, ts, keyA, "k")
	tarData := makeTar(t, tar.FormatUSTAR, tarEntry{Name: "main.py",
		Body: "import time\nopen('/workspace/before.txt', 'w').write('written before the kill')\nprint('written', flush=True)\ntime.sleep(60)\n"})
	ct, mp := multipartBody(t, tarData, `{"config":{"workspace":"k"}}`, metaFormField)
	code, _, body := call(t, ts, http.MethodPost, "/api/v1/exec/async", ct, mp, as(keyA))
	if code != http.StatusAccepted {
		t.Fatalf("async: %d %s", code, body)
	}
	id := decode[map[string]string](t, body)["execution_id"]
	waitForStatus(t, ts, keyA, id, "running")
	time.Sleep(3 * time.Second) // the interpreter starts and writes the file
	if code, body := call2(t, ts, http.MethodDelete, "/api/v1/executions/"+id, keyA); code != 200 {
		t.Fatalf("kill: %d %s", code, body)
	}
	deadline := time.Now().Add(20 * time.Second)
	var res ExecutionResult
	for {
		_, body := call2(t, ts, http.MethodGet, "/api/v1/executions/"+id, keyA)
		res = decode[ExecutionResult](t, body)
		if res.Workspace != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if res.Status != "killed" || res.Workspace == nil || res.Workspace.Version != 1 || res.Workspace.Error != "" {
		t.Fatalf("the killed run: %s, workspace %+v; want killed with version 1", res.Status, res.Workspace)
	}
	code, _, file := call(t, ts, http.MethodGet, "/api/v1/workspaces/k/files/before.txt", "", nil, as(keyA))
	if code != 200 || string(file) != "written before the kill" {
		t.Errorf("before.txt: %d %q", code, file)
	}
}

// TestWorkspaceTwentyWriters: twenty runs at once on one workspace, four
// at a time, each writing a file of its own: every file is there, each
// run made a version of its own, and none was told of a conflict.
func TestWorkspaceTwentyWriters(t *testing.T) {
	eng := enginetest.StartWithWorkspaces(t, engine.Config{Concurrency: 4, QueueSize: 32, DefaultTimeout: 60 * time.Second}, nil)
	c := config.Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := New(eng, Options{Config: c, Version: "test", Isolation: "jail"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	createWorkspace(t, ts, "", "many")
	const n = 20
	var wg sync.WaitGroup
	versions := make([]int64, n)
	for i := range n {
		wg.Go(func() {
			code, res, body := wsEval(t, ts, "", fmt.Sprintf("open('/workspace/f%02d.txt', 'w').write('%d')", i, i), `{"workspace":"many"}`)
			if code != 200 || res.ExitCode != 0 || res.Workspace == nil || res.Workspace.Error != "" || len(res.Workspace.Conflicts) > 0 || !res.Workspace.Changed {
				t.Errorf("writer %d: %d %s", i, code, body)
				return
			}
			versions[i] = res.Workspace.Version
		})
	}
	wg.Wait()
	seen := map[int64]bool{}
	for _, v := range versions {
		seen[v] = true
	}
	if len(seen) != n || seen[0] {
		t.Errorf("the writers made versions %v, want %d different ones", versions, n)
	}
	for i := range n {
		code, _, body := call(t, ts, http.MethodGet, fmt.Sprintf("/api/v1/workspaces/many/files/f%02d.txt", i), "", nil, nil)
		if code != 200 || string(body) != fmt.Sprint(i) {
			t.Errorf("f%02d.txt: %d %q", i, code, body)
		}
	}
}

// TestWorkspacesDisabled: on a server without workspaces, creating one and
// a run naming one are 501 with the reason, and the run never starts.
func TestWorkspacesDisabled(t *testing.T) {
	eng := enginetest.Start(t, engine.Config{Concurrency: 1, QueueSize: 2, DefaultTimeout: 60 * time.Second}, nil)
	c := config.Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := New(eng, Options{Config: c, Version: "test", Isolation: "jail"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	code, _, body := call(t, ts, http.MethodPost, "/api/v1/workspaces", "application/json", []byte(`{"name":"w"}`), nil)
	if code != http.StatusNotImplemented || !strings.Contains(string(body), "not enabled") {
		t.Errorf("create: %d %s, want 501 saying why", code, body)
	}
	code, _, body = wsEval(t, ts, "", "print('ran')", `{"workspace":"w"}`)
	if code != http.StatusNotImplemented || !strings.Contains(string(body), "not enabled") {
		t.Errorf("a run with a workspace: %d %s, want 501 saying why", code, body)
	}
	_, _, body = call(t, ts, http.MethodGet, "/api/v1/executions", "", nil, nil)
	if n := len(decode[ExecutionList](t, body).Executions); n != 0 {
		t.Errorf("%d executions recorded, want none", n)
	}
}

// TestEmptyTypedQueryIsRefused: a number given as ?version= or ?limit=
// (an empty value) is a 400 naming the parameter, not the default. It was
// read as absent: the current version, 20 executions.
func TestEmptyTypedQueryIsRefused(t *testing.T) {
	ts := tenancyServer(t)
	createWorkspace(t, ts, keyA, "w")
	for _, tc := range []struct {
		path  string
		param string
	}{
		{"/api/v1/workspaces/w/files?version=", "version"},
		{"/api/v1/workspaces/w/files?dir=&version=", "version"},
		{"/api/v1/workspaces/w/files/a.txt?version=", "version"},
		{"/api/v1/executions?limit=", "limit"},
		{"/api/v1/executions/exe_nope/events?after=", "after"},
	} {
		code, _, body := call(t, ts, http.MethodGet, tc.path, "", nil, as(keyA))
		if code != http.StatusBadRequest || !strings.Contains(string(body), tc.param) {
			t.Errorf("GET %s: %d %s, want 400 naming %s", tc.path, code, body, tc.param)
		}
	}
	// Left out, or a string parameter left empty, is as before.
	for _, p := range []string{"/api/v1/workspaces/w/files", "/api/v1/workspaces/w/files?dir=", "/api/v1/executions"} {
		if code, _, body := call(t, ts, http.MethodGet, p, "", nil, as(keyA)); code != http.StatusOK {
			t.Errorf("GET %s: %d %s", p, code, body)
		}
	}
	if code, _, body := call(t, ts, http.MethodGet, "/api/v1/workspaces/w/files?version=-2", "", nil, as(keyA)); code != http.StatusBadRequest {
		t.Errorf("version -2: %d %s, want 400", code, body)
	}
}
