package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/pyenv/pyenvtest"
)

// TestForkedSessions: with the default fork server, a session's kernel is
// forked from the fork server of the base environment, so its first cell
// finds the base's preloaded module imported; restarting forks a clean
// one; /metrics counts it with the pool.
func TestForkedSessions(t *testing.T) {
	needRoot(t)
	uv, _ := pyenvtest.Tools(t)
	ix := pyenvtest.NewIndex(t,
		pyenvtest.Wheel{Name: "tinybase", Version: "1.0", Files: map[string]string{"tinybase.py": "NAME = 'base'\n"}})
	srv := startServer(t, t.TempDir(), "--env-dir", pyenvtest.EnvDir(t), "--uv", uv, "--index-url", ix.URL,
		"--base-packages", "tinybase", "--preload", "tinybase", "--prepare-base=true")
	id, run := openSession(t, srv)
	cell := func(code string) string {
		t.Helper()
		r := run(code)
		return r.Result + r.Stderr
	}
	const probe = "import sys\n('tinybase' in sys.modules, 'x' in globals())"
	if got := cell(probe); got != "(True, False)" {
		t.Fatalf("first cell: %s\n%s", got, srv.logs)
	}
	cell("x = 1")
	if got := cell(probe); got != "(True, True)" {
		t.Fatalf("second cell: %s", got)
	}
	if _, err := postJSON(srv.url+"/api/v1/sessions/"+id+"/restart", `{}`); err != nil {
		t.Fatal(err)
	}
	if got := cell(probe); got != "(True, False)" {
		t.Fatalf("after the restart: %s", got)
	}
	if got := metric(t, srv.url, "pyexec_pool_forked_sessions"); got != "1" {
		t.Fatalf("pyexec_pool_forked_sessions = %q", got)
	}
}

// metric reads one unlabelled metric of /metrics.
func metric(t *testing.T, url, name string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				return v
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no metric %s", name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
