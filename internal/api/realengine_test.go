package api

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
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

// newRealServer serves the API over the real engine: embedded JetStream in
// a temporary directory, real jails and interpreters, concurrency 1 and
// queue 1.
func newRealServer(t *testing.T) *httptest.Server {
	t.Helper()
	eng := enginetest.Start(t, engine.Config{Concurrency: 1, QueueSize: 1, DefaultTimeout: 10 * time.Second}, nil)
	c := config.Default()
	c.MaxConcurrency, c.QueueSize = 1, 1
	s, err := New(eng, Options{Config: c, Version: "test", Isolation: "jail"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

func decode[T any](t *testing.T, body []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
	return v
}

func TestRealEngine(t *testing.T) {
	ts := newRealServer(t)

	t.Run("eval returns the last expression", func(t *testing.T) {
		code, _, body := call(t, ts, http.MethodPost, "/api/v1/eval", "application/json",
			[]byte(`{"code":"print('hi')\n6 * 7","eval_last_expr":true}`), nil)
		r := decode[ExecutionResult](t, body)
		if code != 200 || r.Status != "completed" || r.Stdout != "hi\n" || r.Result == nil || *r.Result != "42" || !strings.HasPrefix(r.ExecutionID, "exe_") {
			t.Fatalf("%d %s", code, body)
		}
	})

	t.Run("exception is completed with exit code and error line", func(t *testing.T) {
		tarData := makeTar(t, tar.FormatPAX, tarEntry{Name: "main.py", Body: "import helper\nhelper.boom()\n"},
			tarEntry{Name: "helper.py", Body: "def boom():\n    undefined_name\n"})
		ct, body := multipartBody(t, tarData, `{"entrypoint":"main.py","docker_image":"python:3-slim"}`, metaJSONPart)
		code, _, resp := call(t, ts, http.MethodPost, "/api/v1/exec/sync", ct, body, nil)
		r := decode[ExecutionResult](t, resp)
		if code != 200 || r.Status != "completed" || r.ExitCode == 0 || r.ErrorType != "NameError" || r.ErrorLine != 2 {
			t.Fatalf("%d %s", code, resp)
		}
	})

	t.Run("unknown python_version is 400 with the supported list", func(t *testing.T) {
		code, _, body := call(t, ts, http.MethodPost, "/api/v1/eval", "application/json", []byte(`{"code":"1","python_version":"2.7"}`), nil)
		if code != 400 || !strings.HasPrefix(decode[Error](t, body).Message, `unsupported python_version "2.7"; supported versions: `) {
			t.Fatalf("%d %s", code, body)
		}
	})

	t.Run("async execution streams events and can be killed", func(t *testing.T) {
		tarData := makeTar(t, tar.FormatUSTAR, tarEntry{Name: "main.py", Body: "print('started', flush=True)\nwhile True:\n    pass\n"})
		ct, body := multipartBody(t, tarData, `{}`, metaFormField)
		code, _, resp := call(t, ts, http.MethodPost, "/api/v1/exec/async", ct, body, nil)
		if code != http.StatusAccepted {
			t.Fatalf("async: %d %s", code, resp)
		}
		id := decode[AsyncAccepted](t, resp).ExecutionID

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/api/v1/executions/"+id+"/events", nil)
		req.Header.Set("Accept", ndjsonType)
		res, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		var events []Event
		killed := sync.Once{}
		for sc.Scan() {
			ev := decode[Event](t, sc.Bytes())
			events = append(events, ev)
			if ev.Type == "stdout" && strings.Contains(ev.Data, "started") {
				killed.Do(func() {
					code, _, resp := call(t, ts, http.MethodDelete, "/api/v1/executions/"+id, "", nil, nil)
					if code != 200 || decode[KillResult](t, resp).Status != "killed" {
						t.Errorf("kill: %d %s", code, resp)
					}
				})
			}
		}
		last := events[len(events)-1]
		if last.Type != "status" || last.Data != "killed" {
			t.Fatalf("stream ended with %+v, want status killed; events %+v", last, events)
		}
		_, _, resp = call(t, ts, http.MethodGet, "/api/v1/executions/"+id, "", nil, nil)
		r := decode[ExecutionResult](t, resp)
		if r.Status != "killed" || !strings.Contains(r.Stdout, "started") {
			t.Fatalf("after kill: %s", resp)
		}
	})

	t.Run("a third concurrent request is refused with 429", func(t *testing.T) {
		slow := []byte(`{"code":"import time\ntime.sleep(1.5)"}`)
		var wg sync.WaitGroup
		codes := make([]int, 2)
		for i := range codes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[i], _, _ = call(t, ts, http.MethodPost, "/api/v1/eval", "application/json", slow, nil)
			}()
		}
		time.Sleep(500 * time.Millisecond) // both admitted: one running, one queued
		code, hdr, body := call(t, ts, http.MethodPost, "/api/v1/eval", "application/json", slow, nil)
		wg.Wait()
		if code != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" {
			t.Errorf("third request: %d Retry-After %q %s", code, hdr.Get("Retry-After"), body)
		}
		if codes[0] != 200 || codes[1] != 200 {
			t.Errorf("the admitted requests got %v", codes)
		}
	})
}
