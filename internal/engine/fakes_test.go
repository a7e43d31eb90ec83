package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/store"
)

// fakeRunner behaves like the jail for the engine: it honours ctx, streams
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
type fakeRunner struct {
	runs atomic.Int32
}

func (f *fakeRunner) Run(ctx context.Context, spec sandbox.Spec, out sandbox.OutputFunc) (sandbox.Result, error) {
	f.runs.Add(1)
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

// fakeInterpreters knows one interpreter.
type fakeInterpreters struct{}

func (fakeInterpreters) Lookup(version string) (Interpreter, error) {
	if version == "" || version == "3.11" {
		return Interpreter{Version: "3.11.2", Path: "/usr/bin/python3"}, nil
	}
	return Interpreter{}, fmt.Errorf("unsupported python_version %q; supported versions: 3.11", version)
}

// plainDriver runs the entrypoint directly and reads a JSON report.
type plainDriver struct{}

func (plainDriver) Argv(python, entrypoint string, opts DriverOptions) []string {
	return append([]string{python, entrypoint}, opts.Args...)
}

func (plainDriver) Parse(b []byte) (Report, error) {
	var r struct {
		ErrorType string  `json:"error_type"`
		ErrorLine int     `json:"error_line"`
		Error     string  `json:"error"`
		Result    *string `json:"result"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return Report{}, err
	}
	return Report{ErrorType: r.ErrorType, ErrorLine: r.ErrorLine, Error: r.Error, Result: r.Result}, nil
}

// env is an engine on a real embedded store in a temp dir.
type env struct {
	dir    string
	emb    *store.Embedded
	st     *store.NATS
	eng    *Engine
	runner *fakeRunner
}

// start opens the store in dir and starts an engine on it; both are closed
// when the test ends unless the test closed them.
func start(t *testing.T, dir string, cfg Config, runner Runner) *env {
	t.Helper()
	ctx := context.Background()
	emb, err := store.StartEmbedded(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, emb.Conn(), store.Config{}, store.FollowersOn(emb.FollowConn()))
	if err != nil {
		t.Fatal(err)
	}
	if runner == nil {
		runner = &fakeRunner{}
	}
	eng, err := New(cfg, Deps{Store: st, Runner: runner, Interpreters: fakeInterpreters{}, Driver: plainDriver{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e := &env{dir: dir, emb: emb, st: st, eng: eng}
	e.runner, _ = runner.(*fakeRunner)
	t.Cleanup(func() { e.close(t) })
	return e
}

func (e *env) close(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.eng.Close(ctx); err != nil && err != ErrClosed {
		t.Errorf("engine Close: %v", err)
	}
	if !e.emb.Conn().IsClosed() {
		if err := e.emb.Close(); err != nil {
			t.Errorf("store Close: %v", err)
		}
	}
}

// crash simulates the process dying: the store vanishes under the engine,
// which is then stopped without waiting and can record nothing more.
func (e *env) crash(t *testing.T) {
	t.Helper()
	if err := e.emb.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.eng.Close(ctx); err == nil {
		t.Error("Close with running executions and no time left reported no error")
	}
}

// tester is the caller of the tests' requests (script).
var tester = Caller{Name: "tester"}

func script(s string) Request {
	return Request{Files: []File{{Path: "main.py", Data: []byte(s)}}, Entrypoint: "main.py", Caller: tester.Name, ClientAddr: "127.0.0.1:5555"}
}

// waitFor polls cond until it holds or fails the test after 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func statusOf(t *testing.T, eng *Engine, id string) Status {
	t.Helper()
	x, err := eng.Get(context.Background(), tester, id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return x.Status
}
