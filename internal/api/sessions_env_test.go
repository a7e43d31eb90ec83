package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
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

// newSessionEnvServer serves sessions in real jails with environments
// from a loopback index whose base environment is tinyreq.
func newSessionEnvServer(t *testing.T) *httptest.Server {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real jails and installs; skipped with -short")
	}
	uv, _ := pyenvtest.Tools(t)
	ix := pyenvtest.NewIndex(t,
		pyenvtest.Wheel{Name: "PyYAML", Version: "6.0.99", Files: map[string]string{"yaml/__init__.py": "def safe_load(s):\n    return {'loaded': s}\n"}},
		pyenvtest.Wheel{Name: "tinyreq", Version: "1.2", Files: map[string]string{"tinyreq.py": "VERSION = '1.2'\n"}},
	)
	envs, err := pyenv.NewEnvironments(pyenv.EnvConfig{Dir: pyenvtest.EnvDir(t), IndexURL: ix.URL, UV: uv, Base: []string{"tinyreq"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(envs.Close)
	eng := enginetest.Start(t, engine.Config{Sessions: engine.SessionConfig{Max: 4, DefaultMemoryBytes: 64 << 20}},
		func(_ *store.NATS, jails *sandbox.Manager) engine.Deps {
			res, err := pyenv.NewResolver(pyenv.NewAnalyzer(jails, pyenv.AnalyzerConfig{}), pyenv.ResolverConfig{})
			if err != nil {
				t.Fatal(err)
			}
			return engine.Deps{Jails: jails, Envs: engine.PyenvEnvironments{Resolver: res, Envs: envs}, Forker: forker(t, jails, envs.OperatorChosen, "tinyreq")}
		})
	s, err := New(eng, Options{Config: config.Default(), Version: "test", Isolation: "jail", Heartbeat: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// sseFrames splits a finished event stream into (event, data) pairs,
// comments left out.
func sseFrames(body string) [][2]string {
	var out [][2]string
	for _, block := range strings.Split(body, "\n\n") {
		var ev, data string
		for _, line := range strings.Split(block, "\n") {
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				ev = v
			} else if v, ok := strings.CutPrefix(line, "data: "); ok {
				data = v
			}
		}
		if ev != "" {
			out = append(out, [2]string{ev, data})
		}
	}
	return out
}

func TestSessionEnvironments(t *testing.T) {
	ts := newSessionEnvServer(t)
	js := "application/json"
	cell := func(t *testing.T, id, code string) CellResult {
		t.Helper()
		status, _, body := call(t, ts, http.MethodPost, "/api/v1/sessions/"+id+"/execute", js, []byte(`{"code":`+jsonString(t, code)+`}`), nil)
		if status != http.StatusOK {
			t.Fatalf("execute: %d %s", status, body)
		}
		return decode[CellResult](t, body)
	}

	t.Run("a session gets the base environment by default", func(t *testing.T) {
		code, _, body := call(t, ts, http.MethodPost, "/api/v1/sessions", js, []byte(`{}`), nil)
		if code != http.StatusCreated {
			t.Fatalf("create: %d %s", code, body)
		}
		id := decode[SessionInfo](t, body).SessionID
		// Forked from the base environment's fork server: its preload
		// is imported before the first cell.
		if r := cell(t, id, "import sys\nhad = 'tinyreq' in sys.modules\nimport tinyreq\n(had, tinyreq.VERSION)"); r.Result == nil || *r.Result != "(True, '1.2')" {
			t.Errorf("cell: %+v", r)
		}
	})

	t.Run("requirements go over the base, with install events on the stream", func(t *testing.T) {
		code, hdr, body := call(t, ts, http.MethodPost, "/api/v1/sessions", js, []byte(`{"requirements":"pyyaml\n"}`),
			map[string]string{"Accept": "text/event-stream"})
		if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("create: %d %v %s", code, hdr, body)
		}
		frames := sseFrames(string(body))
		if len(frames) < 2 || frames[0][0] != "install" || frames[len(frames)-1][0] != "session" {
			t.Fatalf("frames %q: want install events, then the session", frames)
		}
		var info SessionInfo
		if err := json.Unmarshal([]byte(frames[len(frames)-1][1]), &info); err != nil || !strings.HasPrefix(info.SessionID, "ses_") {
			t.Fatalf("session event %q: %v", frames[len(frames)-1][1], err)
		}
		if !strings.Contains(string(body), "over the base environment") {
			t.Errorf("the install events do not say pyyaml went over the base: %s", body)
		}
		if r := cell(t, info.SessionID, "import yaml, tinyreq\n(yaml.safe_load('x'), tinyreq.VERSION)"); r.Result == nil || *r.Result != "({'loaded': 'x'}, '1.2')" {
			t.Errorf("cell: %+v", r)
		}
	})

	t.Run("requirements that cannot be installed are a clear install_error", func(t *testing.T) {
		code, _, body := call(t, ts, http.MethodPost, "/api/v1/sessions", js, []byte(`{"requirements":"no-such-dist\n"}`), nil)
		msg := decode[Error](t, body).Message
		if code != http.StatusBadRequest || !strings.HasPrefix(msg, "install_error: ") || !strings.Contains(msg, "no-such-dist") ||
			strings.Contains(msg, "source builds") {
			t.Errorf("%d %s", code, body)
		}
		code, _, body = call(t, ts, http.MethodPost, "/api/v1/sessions", js, []byte(`{"requirements":"no-such-dist\n"}`),
			map[string]string{"Accept": "text/event-stream"})
		frames := sseFrames(string(body))
		if code != http.StatusOK || len(frames) == 0 || frames[len(frames)-1][0] != "error" {
			t.Fatalf("stream: %d %s", code, body)
		}
		var e SessionStreamError
		if err := json.Unmarshal([]byte(frames[len(frames)-1][1]), &e); err != nil || e.Status != http.StatusBadRequest ||
			!strings.HasPrefix(e.Error, "install_error: ") {
			t.Errorf("error event %q: %v", frames[len(frames)-1][1], err)
		}
	})
}

// TestSessionWithPandasFromPyPI is the check a data user makes: a new
// session finds pandas imported already (forked from a fork server that
// preloaded it), and a session that asks for one more package gets it as
// a small layer over the base environment.
func TestSessionWithPandasFromPyPI(t *testing.T) {
	if testing.Short() {
		t.Skip("installs pandas from PyPI; skipped with -short")
	}
	if !pyenvtest.PyPIReachable() {
		t.Skip("PyPI (https://pypi.org/simple) is unreachable")
	}
	uv, _ := pyenvtest.Tools(t)
	envs, err := pyenv.NewEnvironments(pyenv.EnvConfig{Dir: pyenvtest.PyPIEnvDir(t), UV: uv, Base: []string{"pandas"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(envs.Close)
	eng := enginetest.Start(t, engine.Config{Sessions: engine.SessionConfig{Max: 4, DefaultMemoryBytes: 512 << 20}},
		func(_ *store.NATS, jails *sandbox.Manager) engine.Deps {
			res, err := pyenv.NewResolver(pyenv.NewAnalyzer(jails, pyenv.AnalyzerConfig{}), pyenv.ResolverConfig{})
			if err != nil {
				t.Fatal(err)
			}
			return engine.Deps{Jails: jails, Envs: engine.PyenvEnvironments{Resolver: res, Envs: envs}, Forker: forker(t, jails, envs.OperatorChosen, "pandas")}
		})
	s, err := New(eng, Options{Config: config.Default(), Version: "test", Isolation: "jail"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	js := "application/json"
	for _, tc := range []struct{ name, body, code, want string }{
		// The base environment's session forks from its fork server,
		// which preloaded pandas: the first cell finds it imported. One
		// with requirements of its own starts cold (no fork server runs
		// for its layered environment) and imports pandas itself.
		{"base environment", `{}`, "import sys\nhad = 'pandas' in sys.modules\nimport pandas as pd\n(had, int(pd.DataFrame({'a': [1, 2]})['a'].sum()))", "(True, 3)"},
		{"base plus six", `{"requirements":"six"}`, "import sys\nhad = 'pandas' in sys.modules\nimport pandas, six\n(had, six.__name__, pandas.__name__)", "(False, 'six', 'pandas')"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			code, _, body := call(t, ts, http.MethodPost, "/api/v1/sessions", js, []byte(tc.body), nil)
			if code != http.StatusCreated {
				t.Fatalf("create: %d %s", code, body)
			}
			created := time.Now()
			id := decode[SessionInfo](t, body).SessionID
			code, _, body = call(t, ts, http.MethodPost, "/api/v1/sessions/"+id+"/execute", js, []byte(`{"code":`+jsonString(t, tc.code)+`}`), nil)
			t.Logf("create %s, first cell %s", created.Sub(start).Round(time.Millisecond), time.Since(created).Round(time.Millisecond))
			r := decode[CellResult](t, body)
			if code != http.StatusOK || r.Result == nil || *r.Result != tc.want {
				t.Errorf("cell: %d %s", code, body)
			}
		})
	}
	list, err := envs.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		if !e.Base && (e.BaseKey == "" || e.SizeBytes > 8<<20) {
			t.Errorf("environment %s (%v, %d bytes): want only a small layer over the base", e.Key, e.Requirements, e.SizeBytes)
		}
	}
}
