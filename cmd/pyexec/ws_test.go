package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// wsRequest is what the fake workspace server saw of one request.
type wsRequest struct {
	method, path, query string
	body                []byte
}

// wsServer answers the workspace routes with handle and records the
// requests.
func wsServer(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, body []byte)) (string, func() []wsRequest) {
	var (
		mu   sync.Mutex
		seen []wsRequest
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, wsRequest{r.Method, r.URL.Path, r.URL.RawQuery, b})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		handle(w, r, b)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []wsRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]wsRequest(nil), seen...)
	}
}

func tarOf(t *testing.T, entries ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e[0], Mode: 0o644, Size: int64(len(e[1])), Typeflag: tar.TypeReg}
		if strings.HasSuffix(e[0], "/") {
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e[1])
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readTar(t *testing.T, data []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = string(b)
	}
}

const wsCommit = `{"version":4,"base":3,"changed":true,"added":2,"modified":1,"deleted":0,
	"conflicts":[{"path":"a.txt","kept_as":"a.txt.v4","reason":"changed meanwhile"}]}`

func TestWsPush(t *testing.T) {
	url, seen := wsServer(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) { io.WriteString(w, wsCommit) })
	dir := t.TempDir()
	for name, content := range map[string]string{"main.py": "print(1)\n", "lib/util.py": "X = 1\n", "__pycache__/x.pyc": "junk"} {
		p := filepath.Join(dir, "src", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, stdout, stderr := runCLI("--server", url, "ws", "push", filepath.Join(dir, "src"), "proj:code")
	if code != 0 || stdout != "proj:code: version 4 (2 added, 1 modified, 0 deleted)\n" ||
		stderr != "conflict: a.txt: changed meanwhile; yours is kept as a.txt.v4\n" {
		t.Fatalf("push a folder: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	r := seen()[0]
	if r.method != "POST" || r.path != "/api/v1/workspaces/proj/archive" || r.query != "dir=code" {
		t.Errorf("push sent %s %s?%s", r.method, r.path, r.query)
	}
	if got, want := readTar(t, r.body), map[string]string{"main.py": "print(1)\n", "lib/util.py": "X = 1\n"}; !reflect.DeepEqual(got, want) {
		t.Errorf("pushed %v, want %v", got, want)
	}

	code, _, stderr = runCLI("--server", url, "ws", "push", filepath.Join(dir, "src", "lib", "util.py"), "proj")
	r = seen()[1]
	if code != 0 || r.query != "" || !reflect.DeepEqual(readTar(t, r.body), map[string]string{"util.py": "X = 1\n"}) {
		t.Errorf("push a file: exit %d %s, sent ?%s %v", code, stderr, r.query, readTar(t, r.body))
	}
	if code, _, stderr := runCLI("--server", url, "ws", "push", filepath.Join(dir, "missing"), "proj"); code != exitClientError || !strings.Contains(stderr, "no such file") {
		t.Errorf("push of a missing file: exit %d %q", code, stderr)
	}
}

func TestWsPull(t *testing.T) {
	archive := tarOf(t, [2]string{"data/", ""}, [2]string{"data/a.csv", "1,2\n"}, [2]string{"data/sub/b.txt", "bee"})
	evil := tarOf(t, [2]string{"ok.txt", "fine"}, [2]string{"../escaped.txt", "out"})
	url, seen := wsServer(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		switch {
		case r.URL.Path == "/api/v1/workspaces/proj/files/notes.txt":
			w.Header().Set("Content-Type", "application/octet-stream")
			io.WriteString(w, "the notes")
		case strings.HasPrefix(r.URL.Path, "/api/v1/workspaces/proj/files/"):
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"status":400,"detail":"\"data\" is a dir, not a file"}`)
		case r.URL.Path == "/api/v1/workspaces/proj/archive":
			w.Header().Set("Content-Type", "application/x-tar")
			w.Write(archive)
		case r.URL.Path == "/api/v1/workspaces/evil/archive":
			w.Write(evil)
		default:
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"status":404,"detail":"workspace or file not found"}`)
		}
	})
	dir := t.TempDir()
	t.Chdir(dir)

	code, stdout, stderr := runCLI("--server", url, "ws", "pull", "proj:notes.txt", "-", "--version", "2")
	if code != 0 || stdout != "the notes" {
		t.Errorf("pull a file to stdout: exit %d %q %q", code, stdout, stderr)
	}
	if q := seen()[0].query; q != "version=2" {
		t.Errorf("pull --version 2 sent ?%s", q)
	}
	if code, _, stderr := runCLI("--server", url, "ws", "pull", "proj:notes.txt"); code != 0 || readFile(t, "notes.txt") != "the notes" {
		t.Errorf("pull a file by its name: exit %d %s", code, stderr)
	}

	code, _, stderr = runCLI("--server", url, "ws", "pull", "proj:data", "local")
	if code != 0 || stderr != "proj:data: 2 files into local\n" {
		t.Fatalf("pull a folder: exit %d %q", code, stderr)
	}
	if a, b := readFile(t, "local/data/a.csv"), readFile(t, "local/data/sub/b.txt"); a != "1,2\n" || b != "bee" {
		t.Errorf("pulled %q %q", a, b)
	}
	last := seen()[len(seen())-1]
	if last.path != "/api/v1/workspaces/proj/archive" || last.query != "dir=data" {
		t.Errorf("pull a folder asked %s?%s", last.path, last.query)
	}

	if code, _, stderr := runCLI("--server", url, "ws", "pull", "proj"); code != 0 || readFile(t, "proj/data/a.csv") != "1,2\n" {
		t.Errorf("pull a workspace into its name: exit %d %q", code, stderr)
	}

	code, _, stderr = runCLI("--server", url, "ws", "pull", "evil", "e")
	if code != exitClientError || !strings.Contains(stderr, "unsafe name") {
		t.Errorf("a tar entry outside the folder: exit %d %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "escaped.txt")); !os.IsNotExist(err) {
		t.Errorf("a tar entry landed outside the folder: %v", err)
	}

	if code, _, stderr := runCLI("--server", url, "ws", "pull", "theirs:x"); code != exitClientError || !strings.Contains(stderr, "workspace or file not found") {
		t.Errorf("another key's workspace: exit %d %q", code, stderr)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Error(err)
	}
	return string(b)
}

func TestWsCreateLsRm(t *testing.T) {
	url, seen := wsServer(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		switch {
		case r.Method == "POST":
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"owner":"a","name":"proj","quota_bytes":16777216,"version":0}`)
		case r.Method == "DELETE" && r.URL.Path == "/api/v1/workspaces/proj":
			w.WriteHeader(http.StatusNoContent)
		case r.Method == "DELETE":
			io.WriteString(w, `{"version":5,"base":4,"changed":true,"deleted":3}`)
		case r.URL.Path == "/api/v1/workspaces":
			io.WriteString(w, `{"workspaces":[{"name":"proj","version":4,"files":3,"bytes":2048,"quota_bytes":16777216}]}`)
		default:
			io.WriteString(w, `{"files":[{"path":"data","type":"dir","mode":2147484141},{"path":"data/a.csv","type":"file","size":4,"mode":420,"mtime":"2026-01-02T03:04:05Z"},{"path":"data/l","type":"symlink","target":"a.csv"}]}`)
		}
	})
	cases := []struct {
		args                []string
		method, path, query string
		body                string
		stdout              []string // lines or fields the output must hold
	}{
		{args: []string{"create", "proj", "--quota", "16"}, method: "POST", path: "/api/v1/workspaces", body: `{"name":"proj","quota_mb":16}`, stdout: []string{"proj\n"}},
		{args: []string{"ls"}, method: "GET", path: "/api/v1/workspaces", stdout: []string{"NAME", "proj", "2.0 KiB", "16.0 MiB"}},
		{args: []string{"ls", "proj:data"}, method: "GET", path: "/api/v1/workspaces/proj/files", query: "dir=data", stdout: []string{"data/ ", "data/a.csv", "4 B", "data/l -> a.csv"}},
		{args: []string{"ls", "-q", "proj"}, method: "GET", path: "/api/v1/workspaces/proj/files", stdout: []string{"data\ndata/a.csv\ndata/l\n"}},
		{args: []string{"rm", "proj:data"}, method: "DELETE", path: "/api/v1/workspaces/proj/files/data", stdout: []string{"proj:data: version 5 (0 added, 0 modified, 3 deleted)\n"}},
		{args: []string{"rm", "proj"}, method: "DELETE", path: "/api/v1/workspaces/proj", stdout: []string{"proj\n"}},
	}
	for i, tc := range cases {
		code, stdout, stderr := runCLI(append([]string{"--server", url, "ws"}, tc.args...)...)
		if code != 0 || stderr != "" {
			t.Errorf("%v: exit %d %q", tc.args, code, stderr)
			continue
		}
		r := seen()[i]
		if r.method != tc.method || r.path != tc.path || r.query != tc.query {
			t.Errorf("%v sent %s %s?%s, want %s %s?%s", tc.args, r.method, r.path, r.query, tc.method, tc.path, tc.query)
		}
		if tc.body != "" && strings.TrimSpace(string(r.body)) != tc.body {
			t.Errorf("%v sent %s", tc.args, r.body)
		}
		for _, s := range tc.stdout {
			if !strings.Contains(stdout, s) {
				t.Errorf("%v printed %q, want %q in it", tc.args, stdout, s)
			}
		}
	}
}

// run, eval, submit and session create name the workspace in the request.
func TestWorkspaceFlag(t *testing.T) {
	api := &fakeAPI{t: t, result: resOK}
	srv := api.start()
	script := writeScript(t, "main.py", "print(1)\n")
	for _, args := range [][]string{
		{"run", script, "--workspace", "proj", "--workspace-mode", "ro"},
		{"submit", script, "--workspace", "proj", "--workspace-mode", "ro"},
		{"eval", "1", "--workspace", "proj", "--workspace-mode", "ro"},
	} {
		n := len(api.requests())
		if code, _, stderr := runCLI(append([]string{"--server", srv}, args...)...); code != 0 {
			t.Fatalf("%v: exit %d %s", args, code, stderr)
		}
		r := api.requests()[n]
		cfg, _ := r.metadata["config"].(map[string]any)
		if cfg == nil {
			cfg, _ = r.body["config"].(map[string]any)
		}
		if cfg["workspace"] != "proj" || cfg["workspace_mode"] != "ro" {
			t.Errorf("%v sent config %v", args[0], cfg)
		}
	}
	if code, _, stderr := runCLI("--server", srv, "run", script, "--workspace-mode", "ro"); code != exitClientError || !strings.Contains(stderr, "--workspace-mode needs --workspace") {
		t.Errorf("a mode without a workspace: exit %d %q", code, stderr)
	}
	if code, _, stderr := runCLI("--server", srv, "eval", "1", "--workspace", "p", "--workspace-mode", "rx"); code != exitClientError || !strings.Contains(stderr, "rw or ro") {
		t.Errorf("a bad mode: exit %d %q", code, stderr)
	}

	var got map[string]any
	sess := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&got)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: session\ndata: {\"session_id\":\"ses_1\",\"state\":\"idle\"}\n\n")
	}))
	defer sess.Close()
	if code, stdout, stderr := runCLI("--server", sess.URL, "session", "create", "--workspace", "proj"); code != 0 || stdout != "ses_1\n" {
		t.Fatalf("session create: exit %d %q %q", code, stdout, stderr)
	}
	if got["workspace"] != "proj" || got["workspace_mode"] != nil {
		t.Errorf("session create sent %v", got)
	}
}
