package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/client"
)

// TestClientErrorsSayWhatToDo: errors mended on the command line name
// the flag that mends them.
func TestClientErrorsSayWhatToDo(t *testing.T) {
	t.Setenv("PYEXEC_API_KEY", "")
	keyed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		if r.Header.Get("Authorization") == "" {
			io.WriteString(w, `{"error":"missing API key: send Authorization: Bearer <key> or X-API-Key"}`)
			return
		}
		io.WriteString(w, `{"error":"invalid API key"}`)
	}))
	defer keyed.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	tests := []struct {
		name string
		args []string
		want []string
		not  string
	}{
		{"no key", []string{"eval", "1", "--server", keyed.URL}, []string{"needs an API key", "--api-key or PYEXEC_API_KEY", "HTTP 401"}, "X-API-Key"},
		{"a wrong key", []string{"eval", "1", "--server", keyed.URL, "--api-key", "nope"}, []string{"refused the API key", "--api-key", "invalid API key"}, ""},
		{"nothing listening", []string{"eval", "1", "--server", closed}, []string{"connection refused", "no server answers at http://" + closed, "make run", "pyexec serve"}, ""},
		{"not a server address", []string{"eval", "1", "--server", "ftp://host"}, []string{`"ftp://host" is not a server address`}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(tt.args...)
			for _, w := range tt.want {
				if code != exitClientError || !strings.Contains(stderr, w) {
					t.Errorf("exit %d, stderr %q; want 1 and %q", code, stderr, w)
				}
			}
			if tt.not != "" && strings.Contains(stderr, tt.not) {
				t.Errorf("stderr %q names %q", stderr, tt.not)
			}
		})
	}
}

// TestServerWithoutScheme: --server host:port means http://host:port.
func TestServerWithoutScheme(t *testing.T) {
	api := &fakeAPI{t: t, result: resEval}
	addr := strings.TrimPrefix(api.start(), "http://")
	if code, stdout, stderr := runCLI("eval", "--server", addr, "2+2"); code != 0 || stdout != "side effect\n4\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestRunPython: run --python asks for an interpreter version, as the
// image name python-executor's servers read; with --image it is refused.
func TestRunPython(t *testing.T) {
	api := &fakeAPI{t: t, result: resOK}
	script := writeScript(t, "v.py", "")
	if code, _, stderr := runCLI("run", "--server", api.start(), "--python", "3.11", script); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if m := api.requests()[0].metadata; m["docker_image"] != "python:3.11" {
		t.Errorf("metadata docker_image %v, want python:3.11", m["docker_image"])
	}
	if code, _, stderr := runCLI("run", "--server", api.start(), "--python", "3.11", "--image", "python:3.12", script); code != 1 || !strings.Contains(stderr, "give one") {
		t.Errorf("--python with --image: exit %d, %s", code, stderr)
	}
}

func TestStatusWithReason(t *testing.T) {
	for _, tt := range []struct {
		status client.ExecutionStatus
		reason string
		want   string
	}{
		{client.StatusKilled, "killed", "killed"},
		{client.StatusFailed, "timeout", "failed (timeout)"},
		{client.StatusCompleted, "", "completed"},
	} {
		if got := statusWithReason(client.ExecutionResult{Status: tt.status, Reason: tt.reason}); got != tt.want {
			t.Errorf("%s/%s shows %q, want %q", tt.status, tt.reason, got, tt.want)
		}
	}
}
