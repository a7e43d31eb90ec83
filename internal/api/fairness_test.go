package api

import (
	"archive/tar"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/api/metrics"
	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/engine/enginetest"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/store"
)

// fairServer serves the API over a real engine configured by cfg, with
// keys a and b and the per-key usage metrics fed as `pyexec serve` does.
func fairServer(t *testing.T, cfg engine.Config) *httptest.Server {
	t.Helper()
	var sink atomic.Pointer[metrics.Metrics]
	eng := enginetest.Start(t, cfg, func(*store.NATS, *sandbox.Manager) engine.Deps {
		return engine.Deps{OnFinish: func(f engine.Finished) {
			if m := sink.Load(); m != nil {
				m.ObserveExecution(&f.Execution)
				m.ObserveUsage(&f)
			}
		}}
	})
	c := config.Default()
	c.APIKeys = []string{"a:" + keyA, "b:" + keyB}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := New(eng, Options{Config: c, Version: "test", Isolation: "jail"})
	if err != nil {
		t.Fatal(err)
	}
	sink.Store(s.Metrics())
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// submitAsync queues main.py as key and returns the status, headers and
// body of the answer.
func submitAsync(t *testing.T, ts *httptest.Server, key, mainPy string) (int, http.Header, []byte) {
	t.Helper()
	ct, mp := multipartBody(t, makeTar(t, tar.FormatUSTAR, tarEntry{Name: "main.py", Body: mainPy}), `{}`, metaFormField)
	return call(t, ts, http.MethodPost, "/api/v1/exec/async", ct, mp, as(key))
}

// metricsText scrapes /metrics as key.
func metricsText(t *testing.T, ts *httptest.Server, key string) string {
	t.Helper()
	code, _, body := call(t, ts, http.MethodGet, "/metrics", "", nil, as(key))
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	return string(body)
}

// DOS-01: key a floods the node with 50 sleeping async jobs; a second
// later key b's print(1), queued as well, still completes within its
// timeout + 2 s, because free slots go to the keys in turn rather than to
// the oldest job (first in, first out it would wait for all 50: 50 s).
// b's sync print(1) sent at the same time completes in time too.
func TestFairnessFloodDoesNotStarveOtherKey(t *testing.T) {
	ts := fairServer(t, engine.Config{Concurrency: 2, QueueSize: 100, DefaultTimeout: 30 * time.Second})
	for i := range 50 {
		if code, _, body := submitAsync(t, ts, keyA, "import time\ntime.sleep(2)\n"); code != http.StatusAccepted {
			t.Fatalf("a's flood job %d: %d %s", i, code, body)
		}
	}
	time.Sleep(time.Second)
	const timeout = 5 * time.Second
	start := time.Now()
	code, _, body := submitAsync(t, ts, keyB, "print(1)\n")
	if code != http.StatusAccepted {
		t.Fatalf("b's async print(1): %d %s", code, body)
	}
	queued := decode[map[string]string](t, body)["execution_id"]
	code, _, body = call(t, ts, http.MethodPost, "/api/v1/eval", "application/json",
		[]byte(fmt.Sprintf(`{"code":"print(1)","timeout_seconds":%d}`, int(timeout.Seconds()))), as(keyB))
	took := time.Since(start)
	r := decode[ExecutionResult](t, body)
	if code != http.StatusOK || r.Status != "completed" || r.Stdout != "1\n" {
		t.Fatalf("b's sync print(1) behind a's flood: %d %s", code, body)
	}
	if took > timeout+2*time.Second {
		t.Fatalf("b's sync print(1) took %s behind a's flood of 50 jobs, want at most its timeout + 2 s (%s)", took, timeout+2*time.Second)
	}
	t.Logf("b's sync print(1) behind a's flood of 50 jobs: %s", took)
	for statusOf(t, ts, keyB, queued) != "completed" {
		if time.Since(start) > timeout+2*time.Second {
			t.Fatalf("b's async print(1) is not done %s after it was queued behind a's flood of 50 jobs (want at most its timeout + 2 s)",
				time.Since(start))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("b's async print(1) behind a's flood of 50 jobs: done within %s", time.Since(start))

	// b's usage is counted under its key's name; a's jobs are its own.
	m := metricsText(t, ts, keyB)
	for _, want := range []string{`pyexec_key_executions_total{key="b"} 2`, `pyexec_key_output_bytes_total{key="b"} 4`,
		`pyexec_key_cpu_seconds_total{key="b"}`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, m)
		}
	}
}

// Beyond --max-queued-per-key a key's submissions get 429 with
// Retry-After and a message naming the flag, while another key is still
// admitted; a key beyond --max-running-per-key waits rather than runs.
func TestFairnessPerKeyLimits(t *testing.T) {
	ts := fairServer(t, engine.Config{Concurrency: 2, QueueSize: 10, MaxRunningPerKey: 1, MaxQueuedPerKey: 2,
		DefaultTimeout: 60 * time.Second})
	code, _, body := submitAsync(t, ts, keyA, "import time\ntime.sleep(60)\n")
	if code != http.StatusAccepted {
		t.Fatalf("a's first job: %d %s", code, body)
	}
	first := decode[map[string]string](t, body)["execution_id"]
	waitForStatus(t, ts, keyA, first, "running")

	var queued []string
	for i := range 2 {
		code, _, body := submitAsync(t, ts, keyA, "print('queued')\n")
		if code != http.StatusAccepted {
			t.Fatalf("a's queued job %d: %d %s", i, code, body)
		}
		queued = append(queued, decode[map[string]string](t, body)["execution_id"])
	}
	code, hdr, body := submitAsync(t, ts, keyA, "print('one too many')\n")
	if code != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" ||
		!strings.Contains(string(body), "--max-queued-per-key") {
		t.Fatalf("a's job beyond its queued limit: %d Retry-After %q %s; want 429 with Retry-After naming --max-queued-per-key",
			code, hdr.Get("Retry-After"), body)
	}
	// A slot is free, but a is at its running limit: its jobs wait.
	time.Sleep(time.Second)
	if s := statusOf(t, ts, keyA, queued[0]); s != "pending" {
		t.Errorf("a's second job with --max-running-per-key 1 is %s, want pending", s)
	}
	code, _, body = call(t, ts, http.MethodPost, "/api/v1/eval", "application/json", []byte(`{"code":"print(2)"}`), as(keyB))
	if r := decode[ExecutionResult](t, body); code != http.StatusOK || r.Stdout != "2\n" {
		t.Fatalf("b's eval while a is at its limits: %d %s", code, body)
	}
	// Once a's running job is killed, its queued ones run.
	if code, body := call2(t, ts, http.MethodDelete, "/api/v1/executions/"+first, keyA); code != http.StatusOK {
		t.Fatalf("killing a's first job: %d %s", code, body)
	}
	for _, id := range queued {
		waitForStatus(t, ts, keyA, id, "completed")
	}
}

// statusOf is the status of execution id as key sees it.
func statusOf(t *testing.T, ts *httptest.Server, key, id string) string {
	t.Helper()
	code, body := call2(t, ts, http.MethodGet, "/api/v1/executions/"+id, key)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", id, code, body)
	}
	return decode[ExecutionResult](t, body).Status
}

// waitForStatus polls execution id until it has status want (10 s at most).
func waitForStatus(t *testing.T, ts *httptest.Server, key, id, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := statusOf(t, ts, key, id)
		if s == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %s is %s after 10 s, want %s", id, s, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
