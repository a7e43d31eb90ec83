package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/pyenv/pyenvtest"
)

// TestSessionSurvivesGracefulRestart: a session idle when its server gets
// SIGTERM is saved; the server started again on the same data directory
// answers for it under the same id, hibernated, and its next cell finds
// its variables and files and says it resumed. Another key is told it
// does not exist, before and after it resumed.
func TestSessionSurvivesGracefulRestart(t *testing.T) {
	needRoot(t)
	const keyA, keyB = "key-of-a-0123456789abcdef", "key-of-b-0123456789abcdef"
	args := []string{"--api-keys", "a:" + keyA + ",b:" + keyB}
	data := t.TempDir()
	srv := startServer(t, data, args...)
	type answer struct {
		ID      string `json:"session_id"`
		State   string `json:"state"`
		Count   int    `json:"execution_count"`
		Result  string `json:"result"`
		Stderr  string `json:"stderr"`
		Resumed bool   `json:"resumed"`
	}
	call := func(method, path, key, body string) (int, answer) {
		t.Helper()
		code, b := apiCall(t, srv.url, method, path, key, body)
		var a answer
		if code < 300 {
			if err := json.Unmarshal([]byte(b), &a); err != nil {
				t.Fatalf("%s %s: %v: %s", method, path, err, b)
			}
		}
		return code, a
	}
	code, ses := call(http.MethodPost, "/api/v1/sessions", keyA, `{}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d\n%s", code, srv.logs)
	}
	id := ses.ID
	cell := `{"code": "total = sum(range(1000))\nopen('notes.txt', 'w').write('kept')\ntotal", "eval_last_expr": true}`
	if code, r := call(http.MethodPost, "/api/v1/sessions/"+id+"/execute", keyA, cell); code != http.StatusOK || r.Result != "499500" {
		t.Fatalf("first cell: %d %+v", code, r)
	}

	srv.stop(t)
	srv = startServer(t, data, args...)

	code, ses = call(http.MethodGet, "/api/v1/sessions/"+id, keyA, "")
	if code != http.StatusOK || ses.State != "hibernated" || ses.Count != 1 {
		t.Fatalf("the session after the restart: %d %+v\n%s", code, ses, srv.logs)
	}
	for _, path := range []string{"/api/v1/sessions/" + id, "/api/v1/sessions/" + id + "/files"} {
		if code, _ := call(http.MethodGet, path, keyB, ""); code != http.StatusNotFound {
			t.Errorf("key b: GET %s after the restart: %d, want 404", path, code)
		}
	}
	if code, _ := call(http.MethodPost, "/api/v1/sessions/"+id+"/execute", keyB, `{"code": "1"}`); code != http.StatusNotFound {
		t.Errorf("key b: a cell in a's session after the restart: %d, want 404", code)
	}
	read := `{"code": "total, open('notes.txt').read()", "eval_last_expr": true}`
	code, r := call(http.MethodPost, "/api/v1/sessions/"+id+"/execute", keyA, read)
	if code != http.StatusOK || r.Result != "(499500, 'kept')" || !r.Resumed {
		t.Fatalf("the first cell after the restart: %d %+v\n%s", code, r, srv.logs)
	}
	if code, _ := call(http.MethodGet, "/api/v1/sessions/"+id, keyB, ""); code != http.StatusNotFound {
		t.Errorf("key b: the resumed session: %d, want 404", code)
	}
}

// TestTenSessionsSurviveRestart: ten live sessions of two keys, SIGTERM,
// the server started again: ten of ten answer with their own state.
func TestTenSessionsSurviveRestart(t *testing.T) {
	needRoot(t)
	keys := []string{"key-of-a-0123456789abcdef", "key-of-b-0123456789abcdef"}
	args := []string{"--api-keys", "a:" + keys[0] + ",b:" + keys[1]}
	data := t.TempDir()
	srv := startServer(t, data, args...)
	type session struct{ id, key string }
	var all []session
	for i := range 10 {
		key := keys[i%2]
		code, body := apiCall(t, srv.url, http.MethodPost, "/api/v1/sessions", key, `{"memory_mb": 64}`)
		var ses struct {
			ID string `json:"session_id"`
		}
		if code != http.StatusCreated || json.Unmarshal([]byte(body), &ses) != nil {
			t.Fatalf("session %d: %d %s", i, code, body)
		}
		cell := fmt.Sprintf(`{"code": "mine = %d * 1000"}`, i)
		if code, body := apiCall(t, srv.url, http.MethodPost, "/api/v1/sessions/"+ses.ID+"/execute", key, cell); code != http.StatusOK {
			t.Fatalf("session %d: %d %s", i, code, body)
		}
		all = append(all, session{ses.ID, key})
	}
	srv.stop(t)
	srv = startServer(t, data, args...)
	kept := 0
	for i, s := range all {
		code, body := apiCall(t, srv.url, http.MethodPost, "/api/v1/sessions/"+s.id+"/execute", s.key, `{"code": "mine", "eval_last_expr": true}`)
		var r struct {
			Result  string `json:"result"`
			Resumed bool   `json:"resumed"`
		}
		if code == http.StatusOK && json.Unmarshal([]byte(body), &r) == nil && r.Result == fmt.Sprint(i*1000) && r.Resumed {
			kept++
		} else {
			t.Errorf("session %d after the restart: %d %s", i, code, body)
		}
	}
	if kept != len(all) {
		t.Errorf("%d of %d sessions kept their state across the restart\n%s", kept, len(all), srv.logs)
	}
}

// TestRestartServesBeforeSessionEnvironments: a session with
// requirements of its own over the base environment, saved at SIGTERM;
// its environments are gone before the restart (the env directory
// wiped) and the index answers nothing while the server starts again.
// The server still answers /health at once and lists the session
// hibernated; a cell sent while its environments are being built waits
// for them and finds the session's state.
func TestRestartServesBeforeSessionEnvironments(t *testing.T) {
	needRoot(t)
	uv, _ := pyenvtest.Tools(t)
	ix := pyenvtest.NewIndex(t,
		pyenvtest.Wheel{Name: "tinybase", Version: "1.0", Files: map[string]string{"tinybase.py": "NAME = 'base'\n"}},
		pyenvtest.Wheel{Name: "tinyreq", Version: "1.0", Files: map[string]string{"tinyreq.py": "VALUE = 1\n"}})
	gate := newIndexGate(t, ix.URL)
	envDir := pyenvtest.EnvDir(t)
	data := t.TempDir()
	args := []string{"--env-dir", envDir, "--uv", uv, "--index-url", gate.url, "--base-packages", "tinybase"}
	srv := startServer(t, data, args...)
	created, err := postJSON(srv.url+"/api/v1/sessions", `{"requirements": "tinyreq"}`)
	if err != nil {
		t.Fatalf("%v\n%s", err, srv.logs)
	}
	var ses struct {
		ID    string `json:"session_id"`
		State string `json:"state"`
	}
	if err := json.Unmarshal(created, &ses); err != nil || ses.ID == "" {
		t.Fatalf("session: %s", created)
	}
	type cellAnswer struct {
		Result  string `json:"result"`
		Stderr  string `json:"stderr"`
		Resumed bool   `json:"resumed"`
	}
	execute := func(code string) (cellAnswer, error) {
		body, _ := json.Marshal(map[string]any{"code": code, "eval_last_expr": true})
		b, err := postJSON(srv.url+"/api/v1/sessions/"+ses.ID+"/execute", string(body))
		var r cellAnswer
		if err == nil {
			err = json.Unmarshal(b, &r)
		}
		return r, err
	}
	if r, err := execute("import tinybase, tinyreq\nx = tinyreq.VALUE + 40\nx"); err != nil || r.Result != "41" {
		t.Fatalf("first cell: %+v %v", r, err)
	}
	srv.stop(t)

	entries, err := os.ReadDir(envDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(envDir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	gate.shut()
	start := time.Now()
	srv = startServerWithin(t, 30*time.Second, data, cleanEnv(), args...)
	took := time.Since(start)
	t.Logf("healthy %s after the start, its saved session's environments not built", took.Round(time.Millisecond))
	if took > 10*time.Second {
		t.Errorf("the restart took %s to answer /health, want a few seconds", took)
	}
	b, err := getJSON(srv.url+"/api/v1/sessions/"+ses.ID, "")
	if err != nil || json.Unmarshal(b, &ses) != nil || ses.State != "hibernated" {
		t.Fatalf("the saved session after the restart: %s %v\n%s", b, err, srv.logs)
	}

	answered := make(chan struct{})
	var r cellAnswer
	var cellErr error
	go func() {
		defer close(answered)
		r, cellErr = execute("x + tinyreq.VALUE, tinybase.NAME")
	}()
	eventually(t, 30*time.Second, "the resume to wait for the index", func() bool { return gate.held() > 0 })
	select {
	case <-answered:
		t.Fatalf("the cell answered before the session's environment was built: %+v %v", r, cellErr)
	case <-time.After(time.Second):
	}
	gate.release()
	<-answered
	if cellErr != nil || r.Result != "(42, 'base')" || !r.Resumed {
		t.Fatalf("the first cell after the restart: %+v %v\n%s", r, cellErr, srv.logs)
	}
}

// indexGate is a proxy to a test index that holds every request while it
// is shut.
type indexGate struct {
	url string

	mu      sync.Mutex
	open    chan struct{}
	waiting int
}

func newIndexGate(t *testing.T, indexURL string) *indexGate {
	target, err := url.Parse(indexURL)
	if err != nil {
		t.Fatal(err)
	}
	g := &indexGate{open: make(chan struct{})}
	close(g.open)
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		open := g.open
		g.waiting++
		g.mu.Unlock()
		select {
		case <-open:
		case <-r.Context().Done():
		}
		g.mu.Lock()
		g.waiting--
		g.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(g.release) // before the proxy closes: it waits for the requests it holds
	g.url = srv.URL + target.Path
	return g
}

// shut holds the requests from now on; release lets them through.
func (g *indexGate) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = make(chan struct{})
}

func (g *indexGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// held is how many requests wait for the gate.
func (g *indexGate) held() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}
