package api

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/engine/enginetest"
	"github.com/pyexec/pyexec/internal/pyenv"
	"github.com/pyexec/pyexec/internal/pyenv/pyenvtest"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/store"
)

// skipWithoutPyPI skips a test that installs pkgs from PyPI into a real
// session: with -short, when not root, or when PyPI is unreachable.
func skipWithoutPyPI(t *testing.T, pkgs string) {
	t.Helper()
	if testing.Short() {
		t.Skip("installs " + pkgs + " from PyPI; skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the app runs in a real session")
	}
	if !pyenvtest.PyPIReachable() {
		t.Skip("PyPI (https://pypi.org/simple) is unreachable: " + pkgs + " cannot be installed")
	}
}

// appCell is a cell that writes source to app.py, runs the interpreter
// with args (a Python list's items) as a child process with its output in
// app.log, and waits until it listens on 127.0.0.1:port. It prints
// "listening", or the log if the app ended first.
func appCell(source, args string, port int) string {
	return fmt.Sprintf(`
import socket, subprocess, sys, time
open('app.py', 'w').write(%q)
log = open('app.log', 'w')
app = subprocess.Popen([sys.executable, %s], stdout=log, stderr=log)
for _ in range(600):
    try:
        socket.create_connection(('127.0.0.1', %d), timeout=1).close()
        break
    except OSError:
        if app.poll() is not None:
            break
        time.sleep(0.1)
print('listening' if app.poll() is None else 'the app ended: ' + open('app.log').read())
`, source, args, port)
}

// shareSessionApp creates key a's session with requirements on ts, runs
// cell (an appCell) in it and shares port: the share, and how long the
// session took to create (its install).
func shareSessionApp(t *testing.T, ts *httptest.Server, requirements, cell string, port int) (PreviewShare, time.Duration) {
	t.Helper()
	start := time.Now()
	js := "application/json"
	req, _ := json.Marshal(map[string]string{"requirements": requirements})
	code, _, body := call(t, ts, http.MethodPost, "/api/v1/sessions", js, req, as(keyA))
	if code != http.StatusCreated {
		t.Fatalf("a session with %q: %d %s", requirements, code, body)
	}
	ses := decode[SessionInfo](t, body).SessionID
	installed := time.Since(start)
	exec, _ := json.Marshal(map[string]string{"code": cell})
	code, _, body = call(t, ts, http.MethodPost, "/api/v1/sessions/"+ses+"/execute", js, exec, as(keyA))
	if code != http.StatusOK || !strings.Contains(string(body), "listening") {
		t.Fatalf("starting the app: %d %s", code, body)
	}
	code, _, body = call(t, ts, http.MethodPost, "/api/v1/sessions/"+ses+"/ports/"+strconv.Itoa(port)+"/share", "", nil, as(keyA))
	if code != http.StatusCreated {
		t.Fatalf("share: %d %s", code, body)
	}
	return decode[PreviewShare](t, body), installed
}

// startPyPIPreview serves the API, with previews, over a real engine whose
// sessions install their requirements from PyPI (uv into a fresh
// environment directory) and get memory bytes by default. With
// previewHost (a host name, say "preview.localhost"), preview URLs are
// served on http://previewHost:<the server's port>, a separate origin.
func startPyPIPreview(t *testing.T, memory int64, previewHost string) *httptest.Server {
	t.Helper()
	uv, _ := pyenvtest.Tools(t)
	envs, err := pyenv.NewEnvironments(pyenv.EnvConfig{Dir: pyenvtest.PyPIEnvDir(t), UV: uv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(envs.Close)
	eng := enginetest.Start(t, engine.Config{Sessions: engine.SessionConfig{Max: 2, DefaultMemoryBytes: memory},
		Preview: testPreviewConfig(t, time.Hour)},
		func(_ *store.NATS, jails *sandbox.Manager) engine.Deps {
			res, err := pyenv.NewResolver(pyenv.NewAnalyzer(jails, pyenv.AnalyzerConfig{}), pyenv.ResolverConfig{})
			if err != nil {
				t.Fatal(err)
			}
			return engine.Deps{Jails: jails, Envs: engine.PyenvEnvironments{Resolver: res, Envs: envs}}
		})
	ts := httptest.NewUnstartedServer(nil)
	c := config.Default()
	c.APIKeys = []string{"a:" + keyA}
	c.Preview.Enabled = true
	if previewHost != "" {
		_, port, err := net.SplitHostPort(ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Preview.Host = "http://" + net.JoinHostPort(previewHost, port)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := New(eng, Options{Config: c, Version: "test", Isolation: "jail"})
	if err != nil {
		t.Fatal(err)
	}
	ts.Config.Handler = s.Handler()
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}
