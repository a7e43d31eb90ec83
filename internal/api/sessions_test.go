package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pyexec/pyexec/internal/api/metrics"
	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/engine/enginetest"
	"github.com/pyexec/pyexec/internal/pool"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/store"
)

// newSessionServer serves the API over a real engine whose sessions run
// in real jails, at most two sessions on the server.
func newSessionServer(t *testing.T) *httptest.Server {
	t.Helper()
	eng := enginetest.Start(t, engine.Config{Sessions: engine.SessionConfig{Max: 2, DefaultMemoryBytes: 64 << 20}},
		func(_ *store.NATS, jails *sandbox.Manager) engine.Deps {
			return engine.Deps{Jails: jails, Forker: forker(t, jails, nil)}
		})
	s, err := New(eng, Options{Config: config.Default(), Version: "test", Isolation: "jail",
		Collectors: []prometheus.Collector{metrics.SessionCollector(eng.SessionStats)}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// forker is a pool whose fork servers preload preload, for an engine's
// session kernels to fork from as a server's do; trusted says which
// mounts may fork (serve's: the base environments). It is closed after
// the engine (cleanups run last first).
func forker(t *testing.T, jails *sandbox.Manager, trusted func(string) bool, preload ...string) *pool.Pool {
	t.Helper()
	p := pool.New(jails, pool.Config{ForkServer: true, BaseEnv: engine.BaseEnv(), Preload: preload, TrustedMount: trusted})
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("closing the pool: %v", err)
		}
	})
	return p
}

func TestSessionsAPI(t *testing.T) {
	ts := newSessionServer(t)
	js := "application/json"
	code, _, body := call(t, ts, http.MethodPost, "/api/v1/sessions", js, []byte(`{"idle_timeout_seconds":60}`), nil)
	info := decode[SessionInfo](t, body)
	if code != http.StatusCreated || !strings.HasPrefix(info.SessionID, "ses_") || info.State != "idle" || info.MemoryLimitBytes != 64<<20 {
		t.Fatalf("create: %d %s", code, body)
	}
	base := "/api/v1/sessions/" + info.SessionID
	exec := func(t *testing.T, req string) CellResult {
		t.Helper()
		code, _, body := call(t, ts, http.MethodPost, base+"/execute", js, []byte(req), nil)
		if code != http.StatusOK {
			t.Fatalf("execute %s: %d %s", req, code, body)
		}
		return decode[CellResult](t, body)
	}
	steps := []struct {
		name, req, result, stdout, errType string
		count, errLine                     int
	}{
		{name: "first", req: `{"code":"x = 10\nprint('a')"}`, stdout: "a\n", count: 1},
		{name: "second", req: `{"code":"x *= 2\nx"}`, result: "20", count: 2},
		{name: "third", req: `{"code":"x + 1"}`, result: "21", count: 3},
		{name: "error line", req: `{"code":"a = 1\nb = 2\nraise ValueError('no')"}`, errType: "ValueError", errLine: 3, count: 4},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			r := exec(t, st.req)
			got := ""
			if r.Result != nil {
				got = *r.Result
			}
			if r.Status != "completed" || got != st.result || r.Stdout != st.stdout || r.ErrorType != st.errType ||
				r.ErrorLine != st.errLine || r.ExecutionCount != st.count || r.SessionID != info.SessionID {
				t.Errorf("got %+v", r)
			}
		})
	}
	t.Run("interrupt keeps x", func(t *testing.T) {
		done := make(chan CellResult, 1)
		go func() {
			code, _, body := call(t, ts, http.MethodPost, base+"/execute", js, []byte(`{"code":"while True: pass"}`), nil)
			if code != http.StatusOK {
				t.Errorf("execute: %d %s", code, body)
			}
			done <- decode[CellResult](t, body)
		}()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			_, _, body := call(t, ts, http.MethodGet, base, "", nil, nil)
			if decode[SessionInfo](t, body).State == "busy" || time.Now().After(deadline) {
				break
			}
		}
		if code, _, body := call(t, ts, http.MethodPost, base+"/execute", js, []byte(`{"code":"1"}`), nil); code != http.StatusConflict ||
			!strings.Contains(string(body), `"error"`) {
			t.Errorf("second cell while busy: %d %s", code, body)
		}
		time.Sleep(200 * time.Millisecond)
		if code, _, body := call(t, ts, http.MethodPost, base+"/interrupt", "", nil, nil); code != http.StatusOK {
			t.Fatalf("interrupt: %d %s", code, body)
		}
		if r := <-done; r.ErrorType != "KeyboardInterrupt" {
			t.Errorf("interrupted cell: %+v", r)
		}
		if r := exec(t, `{"code":"x"}`); r.Result == nil || *r.Result != "20" {
			t.Errorf("x after interrupt: %+v", r)
		}
	})
	t.Run("files and restart", func(t *testing.T) {
		if code, _, body := call(t, ts, http.MethodPut, base+"/files/data/in.csv", "text/csv", []byte("a,b\n1,2\n"), nil); code != http.StatusCreated {
			t.Fatalf("put: %d %s", code, body)
		}
		code, _, body := call(t, ts, http.MethodGet, base+"/files", "", nil, nil)
		if code != http.StatusOK || !strings.Contains(string(body), `"path":"data/in.csv"`) {
			t.Errorf("list: %d %s", code, body)
		}
		code, _, body = call(t, ts, http.MethodPost, base+"/restart", "", nil, nil)
		if code != http.StatusOK || decode[SessionInfo](t, body).Restarts != 1 {
			t.Fatalf("restart: %d %s", code, body)
		}
		r := exec(t, `{"code":"'x' in globals(), open('data/in.csv').read()"}`)
		if r.Result == nil || *r.Result != `(False, 'a,b\n1,2\n')` || r.ExecutionCount != 1 {
			t.Errorf("after restart: %+v", r)
		}
		exec(t, `{"code":"open('out.txt', 'w').write('made in a cell')"}`)
		code, hdr, body := call(t, ts, http.MethodGet, base+"/files/out.txt", "", nil, nil)
		if code != http.StatusOK || string(body) != "made in a cell" || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
			t.Errorf("download: %d %q %s", code, body, hdr.Get("Content-Type"))
		}
		if code, _, _ := call(t, ts, http.MethodGet, base+"/files/missing.txt", "", nil, nil); code != http.StatusNotFound {
			t.Errorf("missing file: %d", code)
		}
	})
	t.Run("fork whose interpreter ends loading", func(t *testing.T) {
		exec(t, `{"code":"import os\nclass Bomb:\n    def __reduce__(self):\n        return os._exit, (3,)\nb = Bomb()\ny = 7"}`)
		code, _, body := call(t, ts, http.MethodPost, base+"/fork", "", nil, nil)
		if code != http.StatusConflict || !strings.Contains(string(body), "the fork's interpreter ended while loading the parent's state: exit code 3") {
			t.Errorf("fork of a state whose unpickling exits: %d %s, want 409 saying how the fork's interpreter ended", code, body)
		}
		_, _, body = call(t, ts, http.MethodGet, "/api/v1/sessions", "", nil, nil)
		if n := len(decode[SessionList](t, body).Sessions); n != 1 {
			t.Errorf("%d sessions after the failed fork, want the parent only", n)
		}
		if r := exec(t, `{"code":"del b\ny + 1"}`); r.Result == nil || *r.Result != "8" {
			t.Errorf("the parent after the failed fork: %+v", r)
		}
	})
	t.Run("cap and errors", func(t *testing.T) {
		if code, _, body := call(t, ts, http.MethodPost, "/api/v1/sessions", js, []byte(`{}`), nil); code != http.StatusCreated {
			t.Fatalf("second session: %d %s", code, body)
		}
		if code, _, body := call(t, ts, http.MethodPost, "/api/v1/sessions", js, []byte(`{}`), nil); code != http.StatusTooManyRequests ||
			!strings.Contains(string(body), `"error"`) {
			t.Errorf("third session: %d %s", code, body)
		}
		code, _, body := call(t, ts, http.MethodGet, "/metrics", "", nil, nil)
		if code != http.StatusOK || !strings.Contains(string(body), "pyexec_sessions 2") {
			t.Errorf("metrics do not count 2 sessions: %d", code)
		}
		_, _, body = call(t, ts, http.MethodGet, "/api/v1/sessions", "", nil, nil)
		if n := len(decode[SessionList](t, body).Sessions); n != 2 {
			t.Errorf("list: %d sessions", n)
		}
		if code, _, _ := call(t, ts, http.MethodDelete, base, "", nil, nil); code != http.StatusNoContent {
			t.Errorf("delete: %d", code)
		}
		for _, p := range []string{base, base + "/files"} {
			if code, _, body := call(t, ts, http.MethodGet, p, "", nil, nil); code != http.StatusNotFound || !strings.Contains(string(body), "session not found") {
				t.Errorf("GET %s after delete: %d %s", p, code, body)
			}
		}
	})
}
