package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSnapshotsOfSessions, through a real server and its HTTP API with two
// keys: a session's snapshot comes back, after the server restarted, in a
// new session holding the same variables and files; another key is told
// the snapshot and the session do not exist; a fork diverges from its
// parent.
func TestSnapshotsOfSessions(t *testing.T) {
	needRoot(t)
	const keyA, keyB = "key-of-a-0123456789abcdef", "key-of-b-0123456789abcdef"
	args := []string{"--api-keys", "a:" + keyA + ",b:" + keyB}
	data := t.TempDir()
	srv := startServer(t, data, args...)
	do := func(method, path, key, body string) (int, string) {
		t.Helper()
		return apiCall(t, srv.url, method, path, key, body)
	}
	field := func(body, name string) string {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		s, _ := m[name].(string)
		return s
	}
	newSession := func(key, body string) string {
		t.Helper()
		code, b := do(http.MethodPost, "/api/v1/sessions", key, body)
		if code != http.StatusCreated {
			t.Fatalf("create %s: %d %s\n%s", body, code, b, srv.logs)
		}
		return field(b, "session_id")
	}
	cell := func(id, code string) string {
		t.Helper()
		req, _ := json.Marshal(map[string]string{"code": code})
		status, b := do(http.MethodPost, "/api/v1/sessions/"+id+"/execute", keyA, string(req))
		if status != http.StatusOK {
			t.Fatalf("cell %q: %d %s", code, status, b)
		}
		return field(b, "result") + field(b, "stderr")
	}

	parent := newSession(keyA, `{}`)
	cell(parent, "data = {'answer': 42}\ndef double(v):\n    return 2 * v\nopen('notes.txt', 'w').write('kept')")
	code, body := do(http.MethodPost, "/api/v1/sessions/"+parent+"/snapshot", keyA, "")
	if code != http.StatusCreated {
		t.Fatalf("snapshot: %d %s", code, body)
	}
	snap := field(body, "snapshot_id")

	for _, r := range []struct{ method, path, body string }{
		{http.MethodPost, "/api/v1/sessions", `{"from_snapshot":"` + snap + `"}`},
		{http.MethodDelete, "/api/v1/snapshots/" + snap, ""},
		{http.MethodPost, "/api/v1/sessions/" + parent + "/snapshot", ""},
		{http.MethodPost, "/api/v1/sessions/" + parent + "/fork", ""},
	} {
		if code, body := do(r.method, r.path, keyB, r.body); code != http.StatusNotFound {
			t.Errorf("key b: %s %s: %d %s, want 404", r.method, r.path, code, body)
		}
	}
	if _, body := do(http.MethodGet, "/api/v1/snapshots", keyB, ""); strings.Contains(body, snap) {
		t.Errorf("key b lists a's snapshot: %s", body)
	}

	code, body = do(http.MethodPost, "/api/v1/sessions/"+parent+"/fork", keyA, "")
	if code != http.StatusCreated || field(body, "forked_from") != parent {
		t.Fatalf("fork: %d %s", code, body)
	}
	child := field(body, "session_id")
	cell(child, "data['answer'] = 0\nopen('notes.txt', 'w').write('child')")
	cell(parent, "data['parent only'] = True")
	if got := cell(parent, "data, open('notes.txt').read()"); got != "({'answer': 42, 'parent only': True}, 'kept')" {
		t.Errorf("the parent after the fork: %s", got)
	}
	if got := cell(child, "data, open('notes.txt').read()"); got != "({'answer': 0}, 'child')" {
		t.Errorf("the fork: %s", got)
	}

	srv.stop(t)
	srv = startServer(t, data, args...)
	restored := newSession(keyA, `{"from_snapshot":"`+snap+`"}`)
	if got := cell(restored, "data, double(21), open('notes.txt').read()"); got != "({'answer': 42}, 42, 'kept')" {
		t.Errorf("restored after the restart: %s", got)
	}
	if code, body := do(http.MethodDelete, "/api/v1/snapshots/"+snap, keyA, ""); code != http.StatusNoContent {
		t.Errorf("deleting the snapshot: %d %s", code, body)
	}
	if code, _ := do(http.MethodPost, "/api/v1/sessions", keyA, `{"from_snapshot":"`+snap+`"}`); code != http.StatusNotFound {
		t.Errorf("restoring a deleted snapshot: %d, want 404", code)
	}
}

// TestHibernatedSessionResumes, through a real server: a session left idle
// gives back its memory and says it is hibernated (and the metrics count
// it); its next cell finds its variables and says it resumed.
func TestHibernatedSessionResumes(t *testing.T) {
	needRoot(t)
	srv := startServer(t, t.TempDir(), "--session-hibernate-after", "2")
	id, cell := openSession(t, srv)
	cell("weights = list(range(1000000))")
	var info struct {
		State       string `json:"state"`
		MemoryBytes int64  `json:"memory_bytes"`
	}
	eventually(t, 20*time.Second, "the idle session to hibernate", func() bool {
		b, err := getJSON(srv.url+"/api/v1/sessions/"+id, "")
		return err == nil && json.Unmarshal(b, &info) == nil && info.State == "hibernated"
	})
	if info.MemoryBytes != 0 {
		t.Errorf("a hibernated session holds %d bytes", info.MemoryBytes)
	}
	if got := metric(t, srv.url, "pyexec_sessions_hibernated"); got != "1" {
		t.Errorf("pyexec_sessions_hibernated %s, want 1", got)
	}
	if r := cell("sum(weights)"); r.Result != "499999500000" || !r.Resumed {
		t.Fatalf("the first cell after hibernation: %+v\n%s", r, srv.logs)
	}
	if got := metric(t, srv.url, `pyexec_session_resumes_total{outcome="resumed"}`); got != "1" {
		t.Errorf("resumes counted: %s, want 1", got)
	}
	if got := metric(t, srv.url, "pyexec_sessions_hibernated"); got != "0" {
		t.Errorf("pyexec_sessions_hibernated after the resume: %s, want 0", got)
	}
	if r := cell("len(weights)"); r.Result != "1000000" || r.Resumed {
		t.Errorf("the next cell: %+v", r)
	}
}

// cellResult is what the e2e tests read of a cell's result.
type cellResult struct {
	Result  string `json:"result"`
	Stderr  string `json:"stderr"`
	Resumed bool   `json:"resumed"`
}

// openSession creates a session on srv (a server without keys) and returns
// its id and a func that runs a cell in it.
func openSession(t *testing.T, srv *server) (string, func(code string) cellResult) {
	t.Helper()
	created, err := postJSON(srv.url+"/api/v1/sessions", `{}`)
	if err != nil {
		t.Fatalf("%v\n%s", err, srv.logs)
	}
	var ses struct {
		ID string `json:"session_id"`
	}
	if err := json.Unmarshal(created, &ses); err != nil || ses.ID == "" {
		t.Fatalf("session: %s", created)
	}
	return ses.ID, func(code string) cellResult {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"code": code})
		b, err := postJSON(srv.url+"/api/v1/sessions/"+ses.ID+"/execute", string(body))
		if err != nil {
			t.Fatal(err)
		}
		var r cellResult
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
}

// apiCall sends body (JSON, if any) to url+path with API key key and
// returns the answer's status and body.
func apiCall(t *testing.T, url, method, path, key, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
