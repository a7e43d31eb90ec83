package client

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fullResult is an ExecutionResult with every field the contract and
// pyexec define, as a server would send it.
const fullResult = `{
  "execution_id": "exe_6f1c2a9e-8d3b-4b8e-9a51-0c2d7e3f4a10",
  "status": "failed",
  "exit_code": 124,
  "stdout": "partial\n",
  "stderr": "warn\n",
  "error": "execution timeout after 2s",
  "error_type": "TimeoutError",
  "error_line": 7,
  "started_at": "2026-01-02T03:04:05.123456Z",
  "finished_at": "2026-01-02T03:04:07.654321Z",
  "duration_ms": 2530,
  "result": "42",
  "reason": "timeout",
  "timed_out": true,
  "cpu_time_ms": 1999,
  "peak_memory_bytes": 10485760,
  "stdout_truncated": true,
  "stderr_truncated": true,
  "python_version": "3.12.7",
  "created_at": "2026-01-02T03:04:05Z",
  "unknown_future_field": {"ignored": true}
}`

func wantFullResult(t *testing.T) *ExecutionResult {
	t.Helper()
	parse := func(s string) *time.Time {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return &tm
	}
	r := "42"
	return &ExecutionResult{
		ExecutionID:     "exe_6f1c2a9e-8d3b-4b8e-9a51-0c2d7e3f4a10",
		Status:          StatusFailed,
		ExitCode:        124,
		Stdout:          "partial\n",
		Stderr:          "warn\n",
		Error:           "execution timeout after 2s",
		ErrorType:       "TimeoutError",
		ErrorLine:       7,
		StartedAt:       parse("2026-01-02T03:04:05.123456Z"),
		FinishedAt:      parse("2026-01-02T03:04:07.654321Z"),
		DurationMs:      2530,
		Result:          &r,
		Reason:          ReasonTimeout,
		TimedOut:        true,
		CPUTimeMs:       1999,
		PeakMemoryBytes: 10485760,
		StdoutTruncated: true,
		StderrTruncated: true,
		PythonVersion:   "3.12.7",
		CreatedAt:       parse("2026-01-02T03:04:05Z"),
	}
}

// recorded is what the fake server saw of one request.
type recorded struct {
	method, path, query string
	header              http.Header
	body                []byte
}

// fakeServer answers every request with status and body, and records the
// requests it saw.
func fakeServer(t *testing.T, status int, body string, hdr map[string]string) (*httptest.Server, *[]recorded) {
	t.Helper()
	var seen []recorded
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen = append(seen, recorded{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), b})
		for k, v := range hdr {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

// multipartParts decodes a multipart request body into its parts.
type part struct {
	filename, contentType string
	data                  []byte
}

func multipartParts(t *testing.T, rec recorded) map[string]part {
	t.Helper()
	mt, params, err := mime.ParseMediaType(rec.header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		t.Fatalf("Content-Type = %q, want multipart/form-data", rec.header.Get("Content-Type"))
	}
	parts := map[string]part{}
	mr := multipart.NewReader(bytes.NewReader(rec.body), params["boundary"])
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(p)
		parts[p.FormName()] = part{p.FileName(), p.Header.Get("Content-Type"), data}
	}
	return parts
}

// tarContents maps the names of a tar's entries to their contents.
func tarContents(t *testing.T, data []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Format == tar.FormatGNU {
			t.Errorf("%s: GNU tar header; want USTAR or PAX", hdr.Name)
		}
		b, _ := io.ReadAll(tr)
		out[hdr.Name] = string(b)
	}
}

func TestExecuteSyncSendsMultipartAndDecodesEveryField(t *testing.T) {
	srv, seen := fakeServer(t, http.StatusOK, fullResult, nil)
	c := New(srv.URL+"/", WithAPIKey("s3cret"))
	tarData, err := TarFromMap(map[string]string{"main.py": "print(1)\n", "lib/util.py": "X = 1\n"})
	if err != nil {
		t.Fatal(err)
	}
	meta := &Metadata{
		Entrypoint:      "main.py",
		DockerImage:     "python:3.12-slim",
		RequirementsTxt: "requests\n",
		PreCommands:     []string{"echo hi"},
		Stdin:           "input\n",
		EnvVars:         []string{"A=1"},
		ScriptArgs:      []string{"--flag", "x"},
		Config:          &ExecutionConfig{TimeoutSeconds: 30, NetworkDisabled: Bool(false), MemoryMB: 256, DiskMB: 64, CPUShares: 512},
	}
	got, err := c.ExecuteSync(context.Background(), tarData, meta)
	if err != nil {
		t.Fatal(err)
	}
	if want := wantFullResult(t); !reflect.DeepEqual(got, want) {
		t.Errorf("result:\n got %+v\nwant %+v", got, want)
	}

	rec := (*seen)[0]
	if rec.method != http.MethodPost || rec.path != "/api/v1/exec/sync" {
		t.Errorf("request = %s %s, want POST /api/v1/exec/sync", rec.method, rec.path)
	}
	if a := rec.header.Get("Authorization"); a != "Bearer s3cret" {
		t.Errorf("Authorization = %q", a)
	}
	parts := multipartParts(t, rec)
	tp, ok := parts["tar"]
	if !ok || tp.filename != "code.tar" {
		t.Fatalf("tar part = %+v (present %v), want a file part named code.tar", tp, ok)
	}
	if files := tarContents(t, tp.data); !reflect.DeepEqual(files, map[string]string{"main.py": "print(1)\n", "lib/util.py": "X = 1\n"}) {
		t.Errorf("uploaded files = %v", files)
	}
	var sent map[string]any
	if err := json.Unmarshal(parts["metadata"].data, &sent); err != nil {
		t.Fatalf("metadata part is not JSON: %v", err)
	}
	want := map[string]any{
		"entrypoint":       "main.py",
		"docker_image":     "python:3.12-slim",
		"requirements_txt": "requests\n",
		"pre_commands":     []any{"echo hi"},
		"stdin":            "input\n",
		"env_vars":         []any{"A=1"},
		"script_args":      []any{"--flag", "x"},
		"config": map[string]any{
			"timeout_seconds": 30.0, "network_disabled": false, "memory_mb": 256.0, "disk_mb": 64.0, "cpu_shares": 512.0,
		},
	}
	if !reflect.DeepEqual(sent, want) {
		t.Errorf("metadata:\n got %v\nwant %v", sent, want)
	}
}

func TestMetadataNetworkDisabledAbsentVersusFalse(t *testing.T) {
	tests := []struct {
		name string
		cfg  *ExecutionConfig
		want string
	}{
		{"no config", nil, `{"entrypoint":"main.py"}`},
		{"unset", &ExecutionConfig{}, `{"entrypoint":"main.py","config":{}}`},
		{"false", &ExecutionConfig{NetworkDisabled: Bool(false)}, `{"entrypoint":"main.py","config":{"network_disabled":false}}`},
		{"true", &ExecutionConfig{NetworkDisabled: Bool(true)}, `{"entrypoint":"main.py","config":{"network_disabled":true}}`},
		{"an allow list", &ExecutionConfig{NetworkDisabled: Bool(false), Network: &NetworkConfig{Allow: []string{"pypi.org:443"}}},
			`{"entrypoint":"main.py","config":{"network_disabled":false,"network":{"allow":["pypi.org:443"]}}}`},
		{"secrets", &ExecutionConfig{NetworkDisabled: Bool(false), Secrets: []string{"GITHUB_TOKEN", "LLM_KEY"}},
			`{"entrypoint":"main.py","config":{"network_disabled":false,"secrets":["GITHUB_TOKEN","LLM_KEY"]}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(Metadata{Entrypoint: "main.py", Config: tt.cfg})
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("got %s, want %s", b, tt.want)
			}
		})
	}
}

func TestExecuteAsync(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		hdr     map[string]string
		wantID  string
		wantErr func(error) bool
	}{
		{name: "accepted", status: http.StatusAccepted, body: `{"execution_id":"exe_1"}`, wantID: "exe_1"},
		{name: "200 is not 202", status: http.StatusOK, body: `{"execution_id":"exe_1"}`,
			wantErr: func(err error) bool { return errors.Is(err, ErrUnexpectedStatus) }},
		{name: "202 without id", status: http.StatusAccepted, body: `{}`,
			wantErr: func(err error) bool { return err != nil && strings.Contains(err.Error(), "execution_id") }},
		{name: "overloaded", status: http.StatusTooManyRequests, body: `{"error":"server is at capacity"}`, hdr: map[string]string{"Retry-After": "3"},
			wantErr: func(err error) bool {
				var ae *APIError
				return errors.As(err, &ae) && ae.StatusCode == 429 && ae.Message == "server is at capacity" && ae.RetryAfter == 3*time.Second
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, seen := fakeServer(t, tt.status, tt.body, tt.hdr)
			id, err := New(srv.URL).ExecuteAsync(context.Background(), []byte("not checked by the client"), &Metadata{Entrypoint: "a.py"})
			if tt.wantErr != nil {
				if !tt.wantErr(err) {
					t.Fatalf("err = %v, not the expected error", err)
				}
			} else if err != nil || id != tt.wantID {
				t.Fatalf("ExecuteAsync = %q, %v; want %q", id, err, tt.wantID)
			}
			if rec := (*seen)[0]; rec.method != http.MethodPost || rec.path != "/api/v1/exec/async" {
				t.Errorf("request = %s %s", rec.method, rec.path)
			}
		})
	}
}

func TestGetExecution(t *testing.T) {
	t.Run("found", func(t *testing.T) {
		srv, seen := fakeServer(t, http.StatusOK, fullResult, nil)
		got, err := New(srv.URL).GetExecution(context.Background(), "exe_1")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, wantFullResult(t)) {
			t.Errorf("got %+v", got)
		}
		if rec := (*seen)[0]; rec.method != http.MethodGet || rec.path != "/api/v1/executions/exe_1" {
			t.Errorf("request = %s %s", rec.method, rec.path)
		}
		if h := (*seen)[0].header.Get("Authorization"); h != "" {
			t.Errorf("Authorization sent without an API key: %q", h)
		}
	})
	t.Run("not found", func(t *testing.T) {
		srv, _ := fakeServer(t, http.StatusNotFound, `{"error":"execution not found"}`, nil)
		_, err := New(srv.URL).GetExecution(context.Background(), "exe_x")
		var ae *APIError
		if !errors.As(err, &ae) || ae.StatusCode != 404 || ae.Message != "execution not found" {
			t.Fatalf("err = %#v, want APIError 404 execution not found", err)
		}
		if err.Error() != "execution not found (HTTP 404)" {
			t.Errorf("message = %q", err.Error())
		}
	})
}

func TestKill(t *testing.T) {
	tests := []struct {
		name, body string
		want       ExecutionStatus
	}{
		{"running execution", `{"status":"killed"}`, StatusKilled},
		{"already finished", `{"status":"completed"}`, StatusCompleted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, seen := fakeServer(t, http.StatusOK, tt.body, nil)
			c := New(srv.URL)
			got, err := c.Kill(context.Background(), "exe_1")
			if err != nil || got != tt.want {
				t.Fatalf("Kill = %q, %v; want %q", got, err, tt.want)
			}
			if err := c.KillExecution(context.Background(), "exe_1"); err != nil {
				t.Fatal(err)
			}
			for _, rec := range *seen {
				if rec.method != http.MethodDelete || rec.path != "/api/v1/executions/exe_1" {
					t.Errorf("request = %s %s", rec.method, rec.path)
				}
			}
		})
	}
}

func TestWaitForCompletionPollsUntilFinal(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status := "running"
		if calls.Add(1) >= 3 {
			status = "completed"
		}
		io.WriteString(w, `{"execution_id":"exe_1","status":"`+status+`","exit_code":0,"stdout":"done\n"}`)
	}))
	defer srv.Close()
	got, err := New(srv.URL).WaitForCompletion(context.Background(), "exe_1", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != StatusCompleted || got.Stdout != "done\n" || calls.Load() != 3 {
		t.Errorf("got %+v after %d polls, want completed after 3", got, calls.Load())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	calls.Store(-1000) // never completes
	if _, err := New(srv.URL).WaitForCompletion(ctx, "exe_1", time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the context's deadline", err)
	}
}

func TestEvalSendsJSON(t *testing.T) {
	srv, seen := fakeServer(t, http.StatusOK, `{"execution_id":"exe_2","status":"completed","exit_code":0,"result":"4"}`, nil)
	got, err := New(srv.URL).Eval(context.Background(), &SimpleExecRequest{
		Code:            "2+2",
		Files:           []CodeFile{{Name: "main.py", Content: "2+2"}},
		Entrypoint:      "main.py",
		Stdin:           "in",
		Config:          &ExecutionConfig{TimeoutSeconds: 5, NetworkDisabled: Bool(true)},
		PythonVersion:   "3.11",
		EvalLastExpr:    true,
		RequirementsTxt: "-",
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Result == nil || *got.Result != "4" {
		t.Errorf("result = %v, want 4", got.Result)
	}
	rec := (*seen)[0]
	if rec.method != http.MethodPost || rec.path != "/api/v1/eval" || rec.header.Get("Content-Type") != "application/json" {
		t.Errorf("request = %s %s (%s)", rec.method, rec.path, rec.header.Get("Content-Type"))
	}
	want := `{"code":"2+2","files":[{"name":"main.py","content":"2+2"}],"entrypoint":"main.py","stdin":"in",` +
		`"config":{"timeout_seconds":5,"network_disabled":true},"python_version":"3.11","eval_last_expr":true,"requirements_txt":"-"}`
	if string(rec.body) != want {
		t.Errorf("body:\n got %s\nwant %s", rec.body, want)
	}
}

func TestHealth(t *testing.T) {
	srv, seen := fakeServer(t, http.StatusOK, `{"status":"ok","version":"x"}`, nil)
	got, err := New(srv.URL).Health(context.Background())
	if err != nil || got.Status != "ok" {
		t.Fatalf("Health = %+v, %v", got, err)
	}
	if rec := (*seen)[0]; rec.path != "/health" {
		t.Errorf("path = %s", rec.path)
	}
}

func TestListExecutions(t *testing.T) {
	tests := []struct {
		name      string
		opts      ListOptions
		wantQuery string
	}{
		{"defaults", ListOptions{}, ""},
		{"filtered page", ListOptions{Status: StatusRunning, Limit: 5, Cursor: "c/1=2"}, "cursor=c%2F1%3D2&limit=5&status=running"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, seen := fakeServer(t, http.StatusOK, `{"executions":[{"execution_id":"exe_a","status":"running","exit_code":0}],"next_cursor":"next1"}`, nil)
			got, err := New(srv.URL).ListExecutions(context.Background(), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			want := &ExecutionList{Executions: []ExecutionResult{{ExecutionID: "exe_a", Status: StatusRunning}}, Next: "next1"}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v", got)
			}
			if rec := (*seen)[0]; rec.path != "/api/v1/executions" || rec.query != tt.wantQuery {
				t.Errorf("request = %s?%s, want query %q", rec.path, rec.query, tt.wantQuery)
			}
		})
	}
}

func TestAPIErrorDecoding(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		status int
		body   string
		retry  string
		want   APIError
	}{
		{"contract error body", 400, `{"error":"unsupported python_version \"2.7\"; supported versions: 3.12"}`, "",
			APIError{400, `unsupported python_version "2.7"; supported versions: 3.12`, 0}},
		{"too large", 413, `{"error":"total code size 200000 bytes exceeds limit of 102400 bytes"}`, "",
			APIError{413, "total code size 200000 bytes exceeds limit of 102400 bytes", 0}},
		{"problem json", 422, `{"title":"Unprocessable Entity","detail":"bad field"}`, "", APIError{422, "bad field", 0}},
		{"plain text", 502, "upstream down\n", "", APIError{502, "upstream down", 0}},
		{"html page", 503, "<html>busy</html>", "120", APIError{503, "service unavailable", 2 * time.Minute}},
		{"empty body, http date", 429, "", now.Add(30 * time.Second).Format(http.TimeFormat), APIError{429, "too many requests", 30 * time.Second}},
		{"garbage retry-after", 429, `{"error":"slow down"}`, "soon", APIError{429, "slow down", 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tt.status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(tt.body))}
			if tt.retry != "" {
				resp.Header.Set("Retry-After", tt.retry)
			}
			if got := newAPIError(resp, now); *got != tt.want {
				t.Errorf("got %+v, want %+v", *got, tt.want)
			}
		})
	}
}

func TestWithTimeoutBoundsCalls(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	_, err := New(srv.URL, WithTimeout(20*time.Millisecond)).Health(context.Background())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a deadline error", err)
	}
}

func TestWithHTTPClientIsUsed(t *testing.T) {
	srv, _ := fakeServer(t, http.StatusOK, `{"status":"ok"}`, nil)
	var used atomic.Bool
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		used.Store(true)
		return http.DefaultTransport.RoundTrip(r)
	})}
	if _, err := New(srv.URL, WithHTTPClient(hc)).Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !used.Load() {
		t.Error("the custom HTTP client was not used")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
