package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine/runtest"
)

func py(code string) Request {
	return Request{Files: []File{{Path: "main.py", Data: []byte(code)}}, Entrypoint: "main.py", Caller: tester.Name}
}

func TestRealJail(t *testing.T) {
	e := start(t, t.TempDir(), Config{}, runtest.Jails(t))
	ctx := context.Background()
	tests := []struct {
		name    string
		req     Request
		status  Status
		reason  string
		exit    int
		stdout  string
		errText string
	}{
		{name: "hello", req: py("import os\nprint('hello from', os.getcwd(), os.getuid())\n"),
			status: StatusCompleted, stdout: "hello from /work 65534\n"},
		{name: "exception is completed", req: py("print('before')\nundefined_name\n"),
			status: StatusCompleted, exit: 1, stdout: "before\n"},
		{name: "stdin and args", req: func() Request {
			r := py("import sys\nprint(sys.stdin.read().strip(), sys.argv[1:])\n")
			r.Stdin, r.Args = "piped", []string{"a", "b"}
			return r
		}(), status: StatusCompleted, stdout: "piped ['a', 'b']\n"},
		{name: "timeout keeps partial output", req: func() Request {
			r := py("print('partial', flush=True)\nwhile True: pass\n")
			r.Timeout = time.Second
			return r
		}(), status: StatusFailed, reason: ReasonTimeout, exit: 124, stdout: "partial\n", errText: "execution timeout after 1s"},
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
		d, err := New(Config{}, Deps{Store: e.st, Runner: e.eng.deps.Runner, Interpreters: runtest.Interpreters{}, Driver: RunnerDriver{}})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := d.Close(ctx); err != nil {
				t.Errorf("Close: %v", err)
			}
		}()
		req := py("x = 21\nx * 2\n")
		req.EvalLastExpr = true
		x, err := d.RunSync(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if x.Status != StatusCompleted || x.Result == nil || *x.Result != "42" {
			t.Errorf("eval: status %s result %v stderr %q", x.Status, x.Result, x.Stderr)
		}
		x, err = d.RunSync(ctx, py("a = 1\nprint(undefined_name)\n"))
		if err != nil {
			t.Fatal(err)
		}
		if x.Status != StatusCompleted || x.ExitCode == 0 || x.ErrorType != "NameError" || x.ErrorLine != 2 {
			t.Errorf("exception: status %s exit %d error_type %q line %d", x.Status, x.ExitCode, x.ErrorType, x.ErrorLine)
		}
	})
	t.Run("kill a busy loop", func(t *testing.T) {
		id, err := e.eng.Submit(ctx, py("print('started', flush=True)\nwhile True: pass\n"))
		if err != nil {
			t.Fatal(err)
		}
		events, err := e.eng.Follow(ctx, tester, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		for ev := range events {
			if ev.Type == EventStdout {
				break
			}
		}
		start := time.Now()
		if st, err := e.eng.Kill(ctx, tester, id); err != nil || st != StatusKilled {
			t.Fatalf("Kill = %s, %v", st, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Kill took %s", d)
		}
		x, err := e.eng.Get(ctx, tester, id)
		if err != nil {
			t.Fatal(err)
		}
		if x.Status != StatusKilled || x.ExitCode != 137 || !strings.Contains(x.Stdout, "started") {
			t.Errorf("killed record: status %s exit %d stdout %q", x.Status, x.ExitCode, x.Stdout)
		}
	})
}
