package executions

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/engine/runtest"
)

func py(code string) run.Request {
	return run.Request{Files: []run.File{{Path: "main.py", Data: []byte(code)}}, Entrypoint: "main.py", Caller: tester}
}

func TestRealJail(t *testing.T) {
	e := start(t, t.TempDir(), nodeConfig{}, runtest.Jails(t))
	ctx := context.Background()
	tests := []struct {
		name    string
		req     run.Request
		status  run.Status
		reason  string
		exit    int
		stdout  string
		errText string
	}{
		{name: "hello", req: py("import os\nprint('hello from', os.getcwd(), os.getuid())\n"),
			status: run.StatusCompleted, stdout: "hello from /work 65534\n"},
		{name: "exception is completed", req: py("print('before')\nundefined_name\n"),
			status: run.StatusCompleted, exit: 1, stdout: "before\n"},
		{name: "stdin and args", req: func() run.Request {
			r := py("import sys\nprint(sys.stdin.read().strip(), sys.argv[1:])\n")
			r.Stdin, r.Args = "piped", []string{"a", "b"}
			return r
		}(), status: run.StatusCompleted, stdout: "piped ['a', 'b']\n"},
		{name: "timeout keeps partial output", req: func() run.Request {
			// 3 s: under emulation (make test-vm) on a loaded host the
			// interpreter took more than 1 s to start and print.
			r := py("print('partial', flush=True)\nwhile True: pass\n")
			r.Timeout = 3 * time.Second
			return r
		}(), status: run.StatusFailed, reason: run.ReasonTimeout, exit: 124, stdout: "partial\n", errText: "execution timeout after 3s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, err := e.eng.RunSync(ctx, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if x.Status != tt.status || x.Reason != tt.reason || x.ExitCode != tt.exit || x.Stdout != tt.stdout || x.Error != tt.errText {
				t.Errorf("got status=%s reason=%q exit=%d stdout=%q error=%q stderr=%q",
					x.Status, x.Reason, x.ExitCode, x.Stdout, x.Error, x.Stderr)
			}
		})
	}
	t.Run("with the runner driver", func(t *testing.T) {
		n := buildNode(t, nodeConfig{}, Deps{Store: e.st, Runner: e.eng.deps.Runner, Interpreters: runtest.Interpreters{},
			Driver: run.RunnerDriver{}})
		defer func() {
			if err := n.stop(ctx); err != nil {
				t.Errorf("Close: %v", err)
			}
		}()
		d := n.x
		req := py("x = 21\nx * 2\n")
		req.EvalLastExpr = true
		x, err := d.RunSync(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if x.Status != run.StatusCompleted || x.Result == nil || *x.Result != "42" {
			t.Errorf("eval: status %s result %v stderr %q", x.Status, x.Result, x.Stderr)
		}
		x, err = d.RunSync(ctx, py("a = 1\nprint(undefined_name)\n"))
		if err != nil {
			t.Fatal(err)
		}
		if x.Status != run.StatusCompleted || x.ExitCode == 0 || x.ErrorType != "NameError" || x.ErrorLine != 2 {
			t.Errorf("exception: status %s exit %d error_type %q line %d", x.Status, x.ExitCode, x.ErrorType, x.ErrorLine)
		}
	})
	t.Run("kill a busy loop", func(t *testing.T) {
		id, err := e.eng.Submit(ctx, py("print('started', flush=True)\nwhile True: pass\n"))
		if err != nil {
			t.Fatal(err)
		}
		events, err := follow(ctx, e.eng, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		for ev := range events {
			if ev.Type == EventStdout {
				break
			}
		}
		start := time.Now()
		if st, err := e.eng.Kill(ctx, id); err != nil || st != run.StatusKilled {
			t.Fatalf("Kill = %s, %v", st, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Kill took %s", d)
		}
		x, err := getExec(ctx, e.eng, id)
		if err != nil {
			t.Fatal(err)
		}
		if x.Status != run.StatusKilled || x.ExitCode != 137 || !strings.Contains(x.Stdout, "started") {
			t.Errorf("killed record: status %s exit %d stdout %q", x.Status, x.ExitCode, x.Stdout)
		}
	})
}
