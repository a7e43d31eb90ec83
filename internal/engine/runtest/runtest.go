// Package runtest holds what the engine's tests share: a Runner that
// behaves like the jail, a set of one interpreter, a driver without
// Python, the real jail (or a skip with the reason), the tests' caller
// and requests. Only tests import it.
package runtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/store"
)

// Tester is the caller of the tests' requests (Script).
const Tester = "tester"

// Script is a request of Tester whose main.py is s: for Runner, s says
// what the run does.
func Script(s string) run.Request {
	return run.Request{Files: []run.File{{Path: "main.py", Data: []byte(s)}}, Entrypoint: "main.py", Caller: Tester,
		ClientAddr: "127.0.0.1:5555"}
}

// HostPython is the interpreter the tests' real jails run.
const HostPython = "/usr/bin/python3"

// Jails returns the real jail, or skips the test with the reason.
func Jails(t testing.TB) *sandbox.Manager {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the jail builds namespaces, cgroups and mounts")
	}
	if _, err := os.Stat(HostPython); err != nil {
		t.Skipf("needs %s: %v", HostPython, err)
	}
	m, err := sandbox.New(sandbox.Config{})
	if err != nil {
		t.Fatalf("sandbox.New: %v", err)
	}
	return m
}

// Runner behaves like the jail for the engine: it honours ctx, streams
// output and returns results. What it does is chosen by the entrypoint's
// content:
//
//	print:TEXT  writes TEXT to stdout in small pieces and exits 0
//	raise       writes a traceback, exits 1 and reports a NameError
//	block       writes "partial\n", then runs until ctx is cancelled
//	timeout     writes "partial\n", then is killed by its time limit
//	sleep:DUR   sleeps DUR (a time.Duration) or until ctx is cancelled,
//	            then ends timed out (a job that runs to its limit)
//	oom, output_limit, setup_error: ends with that status
type Runner struct {
	Runs atomic.Int32 // runs so far
}

func (f *Runner) Run(ctx context.Context, spec sandbox.Spec, out sandbox.OutputFunc) (sandbox.Result, error) {
	f.Runs.Add(1)
	if err := spec.Validate(); err != nil {
		return sandbox.Result{}, err
	}
	script := string(spec.Files[0].Data)
	start := time.Now()
	res := sandbox.Result{PeakMemory: 10 << 20}
	emit := func(s sandbox.Stream, text string) {
		out(s, []byte(text))
		if s == sandbox.Stdout {
			res.Stdout = append(res.Stdout, text...)
		} else {
			res.Stderr = append(res.Stderr, text...)
		}
	}
	switch {
	case strings.HasPrefix(script, "print:"):
		for _, r := range strings.SplitAfter(strings.TrimPrefix(script, "print:"), "\n") {
			emit(sandbox.Stdout, r)
		}
		res.Status = sandbox.StatusOK
	case script == "raise":
		emit(sandbox.Stderr, "Traceback...\nNameError: name 'x' is not defined\n")
		res.Status, res.ExitCode = sandbox.StatusError, 1
		res.Channel = []byte(`{"error_type":"NameError","error_line":3,"error":"name 'x' is not defined"}`)
	case script == "block":
		emit(sandbox.Stdout, "partial\n")
		<-ctx.Done()
		res.Status, res.Reason, res.ExitCode, res.Signal = sandbox.StatusKilled, "killed on request", 137, 9
	case strings.HasPrefix(script, "sleep:"):
		d, err := time.ParseDuration(strings.TrimPrefix(script, "sleep:"))
		if err != nil {
			return sandbox.Result{}, fmt.Errorf("fake runner: %w", err)
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		res.Status, res.Reason, res.ExitCode, res.Signal = sandbox.StatusTimeout, "wall time limit exceeded", 137, 9
	case script == "timeout":
		emit(sandbox.Stdout, "partial\n")
		res.Status, res.Reason, res.ExitCode, res.Signal = sandbox.StatusTimeout, "wall time limit exceeded", 137, 9
	case script == "oom":
		res.Status, res.Reason, res.ExitCode, res.Signal = sandbox.StatusOOM, "memory limit of 4194304 bytes exceeded", 137, 9
	case script == "output_limit":
		emit(sandbox.Stdout, "xxxx")
		res.Status, res.Reason, res.ExitCode, res.Signal = sandbox.StatusOutputLimit, "stdout exceeded the limit of 4 bytes", 137, 9
		res.StdoutTruncated = true
	case script == "setup_error":
		res.Status, res.Reason = sandbox.StatusSetupError, "mounting /work: permission denied"
	default:
		return sandbox.Result{}, fmt.Errorf("fake runner: unknown script %q", script)
	}
	res.WallTime = time.Since(start)
	res.CPUTime = res.WallTime / 2
	return res, nil
}

// Interpreters knows one interpreter, 3.11.2 at /usr/bin/python3.
type Interpreters struct{}

func (Interpreters) Lookup(version string) (run.Interpreter, error) {
	if version == "" || version == "3.11" {
		return run.Interpreter{Version: "3.11.2", Path: "/usr/bin/python3"}, nil
	}
	return run.Interpreter{}, fmt.Errorf("unsupported python_version %q; supported versions: 3.11", version)
}

// PlainDriver runs the entrypoint directly and reads a JSON report.
type PlainDriver struct{}

func (PlainDriver) Argv(python, entrypoint string, opts run.DriverOptions) []string {
	return append([]string{python, entrypoint}, opts.Args...)
}

func (PlainDriver) Parse(b []byte) (run.Report, error) {
	var r struct {
		ErrorType string  `json:"error_type"`
		ErrorLine int     `json:"error_line"`
		Error     string  `json:"error"`
		Result    *string `json:"result"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return run.Report{}, err
	}
	return run.Report{ErrorType: r.ErrorType, ErrorLine: r.ErrorLine, Error: r.Error, Result: r.Result}, nil
}

// WaitFor polls cond until it holds or fails the test after 10s.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	WaitForWithin(t, 10*time.Second, what, cond)
}

// WaitForWithin is WaitFor with its own bound, for a condition that
// takes a known time of its own (a node declared lost after its
// heartbeats stop, say).
func WaitForWithin(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// AuditLines are the lines of st's audit trail, oldest first.
func AuditLines(t testing.TB, st *store.NATS) [][]byte {
	t.Helper()
	ctx := context.Background()
	s, err := st.JetStream().Stream(ctx, store.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m.Data)
	}
	return out
}
