package api

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/engine/enginetest"
)

// newCompatServer is newRealServer with the server configuration changed
// by mutate (nil: the defaults).
func newCompatServer(t *testing.T, mutate func(*config.Config)) *httptest.Server {
	t.Helper()
	eng := enginetest.Start(t, engine.Config{Concurrency: 1, QueueSize: 2, DefaultTimeout: 10 * time.Second}, nil)
	c := config.Default()
	c.MaxConcurrency, c.QueueSize = 1, 2
	if mutate != nil {
		mutate(&c)
	}
	s, err := New(eng, Options{Config: c, Version: "test", Isolation: "jail"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// wireTimeRE is every timestamp pyexec writes: UTC, six fractional digits.
var wireTimeRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)

// TestPythonExecutorCompat holds pyexec to what python-executor's own
// clients, scripts and tests expect (issue 13), against the real server.
// Each subtest's comment states python-executor's behaviour. Item 1 (a
// tar made with `tar -C dir .`) is TestUploadPathBounds.
func TestPythonExecutorCompat(t *testing.T) {
	ts := newCompatServer(t, nil)
	js := "application/json"
	eval := func(t *testing.T, body string) (int, ExecutionResult, map[string]any, []byte) {
		t.Helper()
		code, _, resp := call(t, ts, http.MethodPost, "/api/v1/eval", js, []byte(body), nil)
		return code, decode[ExecutionResult](t, resp), decode[map[string]any](t, resp), resp
	}
	upload := func(t *testing.T, tarData []byte, meta string, how int) (int, ExecutionResult, map[string]any, []byte) {
		t.Helper()
		ct, body := multipartBody(t, tarData, meta, how)
		code, _, resp := call(t, ts, http.MethodPost, "/api/v1/exec/sync", ct, body, nil)
		return code, decode[ExecutionResult](t, resp), decode[map[string]any](t, resp), resp
	}
	mainPy := makeTar(t, tar.FormatUSTAR, tarEntry{Name: "main.py", Body: "print('hello')\n"})

	// python-executor sets error only when status is failed; a Python
	// exception is completed with exit code 1 and no error (its CLI would
	// otherwise print an extra "Error: boom" line).
	t.Run("2 error only for failed", func(t *testing.T) {
		code, r, raw, resp := eval(t, `{"code":"raise ValueError('boom')"}`)
		if _, has := raw["error"]; code != 200 || has || r.Status != "completed" || r.ExitCode != 1 ||
			r.ErrorType != "ValueError" || r.ErrorLine != 1 || !strings.Contains(r.Stderr, "ValueError: boom") {
			t.Fatalf("exception: %d %s", code, resp)
		}
		code, r, _, resp = eval(t, `{"code":"print('partial', flush=True)\nwhile True:\n    pass\n","config":{"timeout_seconds":1}}`)
		if code != 200 || r.Status != "failed" || r.Error != "execution timeout after 1s" || r.Stdout != "partial\n" {
			t.Fatalf("timeout: %d %s", code, resp)
		}
	})

	// python-executor writes RFC 3339 times whose fraction its Python client
	// parses with datetime.fromisoformat, which before 3.11 takes only 3 or
	// 6 digits: every time pyexec writes has exactly 6 (results, listings,
	// events). The 1,000-run check with real interpreters is in e2e.
	t.Run("3 timestamps have six fractional digits", func(t *testing.T) {
		var times []string
		var collect func(t *testing.T, v any)
		collect = func(t *testing.T, v any) {
			t.Helper()
			switch v := v.(type) {
			case map[string]any:
				for k, x := range v {
					if s, ok := x.(string); ok && (strings.HasSuffix(k, "_at") || k == "time" || k == "last_activity") {
						times = append(times, s)
					} else {
						collect(t, x)
					}
				}
			case []any:
				for _, x := range v {
					collect(t, x)
				}
			}
		}
		var id string
		for range 5 {
			code, r, raw, resp := eval(t, `{"code":"print(1)"}`)
			if code != 200 || r.Status != "completed" {
				t.Fatalf("%d %s", code, resp)
			}
			collect(t, raw)
			id = r.ExecutionID
		}
		for _, path := range []string{"/api/v1/executions/" + id, "/api/v1/executions?limit=5"} {
			code, _, body := call(t, ts, http.MethodGet, path, "", nil, nil)
			if code != 200 {
				t.Fatalf("%s: %d %s", path, code, body)
			}
			collect(t, decode[any](t, body))
		}
		code, _, body := call(t, ts, http.MethodGet, "/api/v1/executions/"+id+"/events", "", nil, map[string]string{"Accept": ndjsonType})
		sc := bufio.NewScanner(bytes.NewReader(body))
		for sc.Scan() {
			collect(t, decode[any](t, sc.Bytes()))
		}
		if code != 200 || len(times) < 5*3+3+5*3+2 {
			t.Fatalf("collected %d times (events %d %s)", len(times), code, body)
		}
		for _, s := range times {
			if !wireTimeRE.MatchString(s) {
				t.Errorf("time %q is not RFC 3339 UTC with 6 fractional digits", s)
			}
		}
	})

	// python-executor ran the pre-commands and the script as one shell
	// line: a failing command ends it as completed, with that command's
	// exit code and output (no error).
	t.Run("4 failing pre_command is completed with its exit code", func(t *testing.T) {
		code, r, raw, resp := upload(t, mainPy, `{"pre_commands":["echo building; echo oops >&2; exit 4","echo never"]}`, metaJSONPart)
		if _, has := raw["error"]; code != 200 || has || r.Status != "completed" || r.ExitCode != 4 ||
			r.Stdout != "building\n" || r.Stderr != "oops\n" || r.Reason != engine.ReasonPreCommand {
			t.Fatalf("%d %s", code, resp)
		}
	})

	// python-executor ran `python <entrypoint>` whatever the archive held:
	// a missing file is 200, completed, exit code 2 and Python's own
	// "can't open file" message on stderr.
	t.Run("5 missing entrypoint is Python's exit 2", func(t *testing.T) {
		code, r, _, resp := upload(t, mainPy, `{"entrypoint":"nope.py"}`, metaFormField)
		if code != 200 || r.Status != "completed" || r.ExitCode != 2 || r.Stdout != "" ||
			!regexp.MustCompile(`^python[0-9.]*: can't open file '/work/nope.py': \[Errno 2\] No such file or directory\n$`).MatchString(r.Stderr) {
			t.Fatalf("%d %s", code, resp)
		}
	})

	// python-executor documents its API docs at /docs/index.html and the
	// machine-readable description at /docs/doc.json.
	t.Run("6 python-executor's docs URLs", func(t *testing.T) {
		_, _, page := call(t, ts, http.MethodGet, "/docs", "", nil, nil)
		code, hdr, body := call(t, ts, http.MethodGet, "/docs/index.html", "", nil, nil)
		if code != 200 || !bytes.Equal(body, page) || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
			t.Fatalf("index.html: %d %q", code, hdr.Get("Content-Type"))
		}
		_, _, spec := call(t, ts, http.MethodGet, "/openapi.json", "", nil, nil)
		code, hdr, body = call(t, ts, http.MethodGet, "/docs/doc.json", "", nil, nil)
		if code != 200 || !bytes.Equal(body, spec) || !strings.HasPrefix(hdr.Get("Content-Type"), "application/") ||
			!bytes.Contains(body, []byte(`"/api/v1/eval"`)) {
			t.Fatalf("doc.json: %d %q %.200s", code, hdr.Get("Content-Type"), body)
		}
	})

	// python-executor's handler test expects these words (it checks that
	// the body contains them).
	t.Run("7 python-executor's error words", func(t *testing.T) {
		for body, want := range map[string]string{`{}`: "either 'code' or 'files' must be provided", `not json`: "invalid JSON"} {
			code, _, resp := call(t, ts, http.MethodPost, "/api/v1/eval", js, []byte(body), nil)
			if code != 400 || !strings.Contains(decode[Error](t, resp).Message, want) {
				t.Errorf("%s: %d %s, want 400 with %q", body, code, resp, want)
			}
		}
	})

	// python-executor answers a multipart request without metadata with
	// 400 "missing metadata".
	t.Run("8 multipart without metadata", func(t *testing.T) {
		for name, how := range map[string]int{"absent": metaNone, "empty": metaFormField} {
			ct, body := multipartBody(t, mainPy, "", how)
			code, _, resp := call(t, ts, http.MethodPost, "/api/v1/exec/sync", ct, body, nil)
			if code != 400 || !strings.HasPrefix(decode[Error](t, resp).Message, "missing metadata") {
				t.Errorf("%s: %d %s", name, code, resp)
			}
		}
	})

	// Decided differences (docs/compat.md): python-executor leaves
	// error_type out for a bare Exception and trims stdout's trailing
	// newline when eval returns a result; pyexec names every exception
	// class and returns stdout byte for byte.
	t.Run("9 bare Exception and stdout kept as written", func(t *testing.T) {
		code, r, _, resp := eval(t, `{"code":"raise Exception('plain')"}`)
		if code != 200 || r.Status != "completed" || r.ErrorType != "Exception" || r.ExitCode != 1 {
			t.Fatalf("%d %s", code, resp)
		}
		code, r, _, resp = eval(t, `{"code":"print('hi')\n6 * 7","eval_last_expr":true}`)
		if code != 200 || r.Stdout != "hi\n" || r.Result == nil || *r.Result != "42" {
			t.Fatalf("%d %s", code, resp)
		}
	})

	// python-executor accepted `--timeout 600` and large memory limits; a
	// default pyexec server refuses them with a 400 that names the server
	// flag raising the maximum.
	t.Run("maximums name their flag", func(t *testing.T) {
		for cfg, want := range map[string]string{`{"timeout_seconds":600}`: "--max-timeout", `{"memory_mb":4096}`: "--max-memory-mb", `{"disk_mb":9000}`: "--max-disk-mb"} {
			code, _, resp := call(t, ts, http.MethodPost, "/api/v1/eval", js, []byte(`{"code":"1","config":`+cfg+`}`), nil)
			if code != 400 || !strings.Contains(decode[Error](t, resp).Message, want) {
				t.Errorf("%s: %d %s, want 400 naming %s", cfg, code, resp, want)
			}
		}
	})

	// python-executor handed the tar to Docker, which also took a
	// gzip-compressed one; its expanded size is capped like an
	// uncompressed upload.
	t.Run("gzip-compressed tar", func(t *testing.T) {
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(makeTar(t, tar.FormatPAX, tarEntry{Name: "main.py", Body: "import util\nprint(util.X)\n"}, tarEntry{Name: "util.py", Body: "X = 'unzipped'\n"}))
		zw.Close()
		code, r, _, resp := upload(t, gz.Bytes(), `{"entrypoint":"main.py"}`, metaJSONPart)
		if code != 200 || r.Status != "completed" || r.Stdout != "unzipped\n" {
			t.Fatalf("%d %s", code, resp)
		}

		// A bomb: 60 MiB of zeros in six files, compressed to about 60 KiB,
		// past both the 50 MiB archive size and the 50 MiB body cap.
		var bomb bytes.Buffer
		zw = gzip.NewWriter(&bomb)
		tw := tar.NewWriter(zw)
		tw.WriteHeader(&tar.Header{Name: "main.py", Mode: 0o644, Size: 5})
		tw.Write([]byte("pass\n"))
		for i := range 6 {
			tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("zeros%d.bin", i), Mode: 0o644, Size: 10 << 20})
			tw.Write(make([]byte, 10<<20))
		}
		tw.Close()
		zw.Close()
		code, _, _, resp = upload(t, bomb.Bytes(), `{}`, metaJSONPart)
		if code != http.StatusRequestEntityTooLarge || !strings.Contains(decode[Error](t, resp).Message, "52428800 bytes") {
			t.Fatalf("bomb of %d bytes: %d %s", bomb.Len(), code, resp)
		}
	})
}

// TestRaisedMaximums: the maximums python-executor's examples exceed are
// the operator's to raise (--max-timeout, --max-memory-mb), and then such
// a request runs.
func TestRaisedMaximums(t *testing.T) {
	ts := newCompatServer(t, func(c *config.Config) { c.MaxTimeout, c.MaxMemoryMB = 600*time.Second, 4096 })
	code, _, resp := call(t, ts, http.MethodPost, "/api/v1/eval", "application/json",
		[]byte(`{"code":"print('long allowed')","config":{"timeout_seconds":600,"memory_mb":4096}}`), nil)
	if r := decode[ExecutionResult](t, resp); code != 200 || r.Status != "completed" || r.Stdout != "long allowed\n" {
		t.Fatalf("%d %s", code, resp)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(resp, &raw); err != nil || !wireTimeRE.MatchString(strings.Trim(string(raw["finished_at"]), `"`)) {
		t.Fatalf("finished_at %s", raw["finished_at"])
	}
}
