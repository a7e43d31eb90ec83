package runner

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// interpreters lists the CPythons the driver is tested with (the system one
// and pyenv's 3.8-3.13, every version pyenv.Discover offers); a missing one
// is reported as a skipped subtest, never silently dropped.
func interpreters(t *testing.T) []string {
	t.Helper()
	paths := []string{"/usr/bin/python3"}
	for _, pattern := range []string{"3.8*", "3.9*", "3.10*", "3.11*", "3.12*", "3.13*"} {
		m, err := filepath.Glob("/root/.pyenv/versions/" + pattern + "/bin/python3")
		if err != nil {
			t.Fatal(err)
		}
		if len(m) == 0 {
			m = []string{"/root/.pyenv/versions/" + pattern + "/bin/python3"}
		}
		paths = append(paths, m...)
	}
	return paths
}

// forEachPython runs f once per interpreter in a subtest named after it.
func forEachPython(t *testing.T, f func(t *testing.T, python string)) {
	for _, py := range interpreters(t) {
		name := "system"
		if v, ok := strings.CutPrefix(py, "/root/.pyenv/versions/"); ok {
			name = strings.TrimSuffix(v, "/bin/python3")
		}
		t.Run(name, func(t *testing.T) {
			if _, err := os.Stat(py); err != nil {
				t.Skipf("interpreter not installed: %v", err)
			}
			t.Parallel()
			f(t, py)
		})
	}
}

// outcome is what one driver run produced, as the jail would see it.
type outcome struct {
	stdout, stderr string
	exitCode       int
	signal         syscall.Signal
	channel        []byte
	report         Report
	reportErr      error
}

// runDriver runs the driver with python in a fresh workspace holding files,
// with the report channel on opts.ReportFD (default 3) as the jail does.
func runDriver(t *testing.T, python string, files map[string]string, opts Options, stdin string) outcome {
	t.Helper()
	return execDriver(t, writeFiles(t, files), Argv(python, opts), testEnv(), stdin, nil, opts.ReportFD)
}

// testEnv is the environment the driver runs with in these tests.
func testEnv() []string { return []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"} }

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// execDriver runs argv in dir with the report on fd reportFD (0 = 3) and,
// when request is not nil, a pipe carrying it on RequestFD.
func execDriver(t *testing.T, dir string, argv, env []string, stdin string, request []byte, reportFD int) outcome {
	t.Helper()
	fd := reportFD
	if fd == 0 {
		fd = ChannelFD
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	for i := 3; i < fd; i++ {
		cmd.ExtraFiles = append(cmd.ExtraFiles, devnull)
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, w)
	var reqW *os.File
	if request != nil {
		reqR, rw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer reqR.Close()
		reqW = rw
		cmd.ExtraFiles = append(cmd.ExtraFiles, reqR)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if reqW != nil {
		if _, err := reqW.Write(request); err != nil {
			t.Fatal(err)
		}
		reqW.Close()
	}
	channel := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		channel <- b
	}()
	waitErr := cmd.Wait()
	o := outcome{stdout: stdout.String(), stderr: stderr.String(), channel: <-channel}
	var exitErr *exec.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &exitErr):
		ws := exitErr.Sys().(syscall.WaitStatus)
		o.exitCode = ws.ExitStatus()
		if ws.Signaled() {
			o.signal = ws.Signal()
			o.exitCode = 128 + int(o.signal)
		}
	default:
		t.Fatal(waitErr)
	}
	o.report, o.reportErr = ParseReport(o.channel)
	return o
}

// mustReport fails the test when the run produced no valid report.
func (o outcome) mustReport(t *testing.T) Report {
	t.Helper()
	if o.reportErr != nil {
		t.Fatalf("report: %v\nchannel: %q\nstderr: %s", o.reportErr, o.channel, o.stderr)
	}
	if o.report.ExitCode != o.exitCode {
		t.Errorf("report exit_code %d, process exited %d", o.report.ExitCode, o.exitCode)
	}
	return o.report
}

func TestDriverErrors(t *testing.T) {
	helper := "def value():\n    data = {}\n    return data['missing']\n"
	cases := []struct {
		name  string
		files map[string]string
		eval  bool
		want  Error // Traceback is checked for user frames separately
	}{
		{"error on line 3", map[string]string{"main.py": "a = 1\nb = 2\nprint(undefined)\nc = 4\n"}, false,
			Error{Name: "NameError", Value: "name 'undefined' is not defined", Line: 3, File: "main.py"}},
		{"error on line 3 with eval_last_expr", map[string]string{"main.py": "a = 1\nb = 2\nprint(undefined)\nc = 4\n"}, true,
			Error{Name: "NameError", Value: "name 'undefined' is not defined", Line: 3, File: "main.py"}},
		{"error in the last expression", map[string]string{"main.py": "a = 1\nb = 2\na / 0\n"}, true,
			Error{Name: "ZeroDivisionError", Value: "division by zero", Line: 3, File: "main.py"}},
		{"syntax error", map[string]string{"main.py": "x = 1\n\ndef f(:\n    pass\n"}, false,
			Error{Name: "SyntaxError", Line: 3, File: "main.py"}},
		{"syntax error with eval_last_expr", map[string]string{"main.py": "x = 1\n\ndef f(:\n    pass\n"}, true,
			Error{Name: "SyntaxError", Line: 3, File: "main.py"}},
		{"innermost user frame in an imported module",
			map[string]string{"main.py": "import helper\n\nhelper.value()\n", "helper.py": helper}, false,
			Error{Name: "KeyError", Value: "'missing'", Line: 3, File: "helper.py"}},
		{"user frame rather than the stdlib frame",
			map[string]string{"main.py": "import json\n\n\njson.loads('{')\n"}, false,
			Error{Name: "JSONDecodeError", Line: 4, File: "main.py"}},
		{"syntax error in an imported module",
			map[string]string{"main.py": "import broken\n", "broken.py": "ok = 1\nnot ok ok\n"}, false,
			Error{Name: "SyntaxError", Line: 2, File: "broken.py"}},
		{"error raised from __repr__ of the last value",
			map[string]string{"main.py": "class C:\n    def __repr__(self):\n        raise RuntimeError('no repr')\nC()\n"}, true,
			Error{Name: "RuntimeError", Value: "no repr", Line: 3, File: "main.py"}},
		{"stdlib traceback not shadowed by an unimported user module",
			map[string]string{"main.py": "raise ValueError('x')\n", "traceback.py": "raise SystemExit(9)\n"}, false,
			Error{Name: "ValueError", Value: "x", Line: 1, File: "main.py"}},
	}
	forEachPython(t, func(t *testing.T, py string) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				o := runDriver(t, py, tc.files, Options{EvalLastExpr: tc.eval}, "")
				rep := o.mustReport(t)
				if o.exitCode != 1 {
					t.Errorf("exit code %d, want 1", o.exitCode)
				}
				if rep.Error == nil {
					t.Fatalf("no error in report %+v; stderr:\n%s", rep, o.stderr)
				}
				got := *rep.Error
				if got.Name != tc.want.Name || got.Line != tc.want.Line || got.File != tc.want.File {
					t.Errorf("error %s at %s:%d, want %s at %s:%d", got.Name, got.File, got.Line,
						tc.want.Name, tc.want.File, tc.want.Line)
				}
				if tc.want.Value != "" && got.Value != tc.want.Value {
					t.Errorf("value %q, want %q", got.Value, tc.want.Value)
				}
				if !strings.Contains(o.stderr, tc.want.Name) {
					t.Errorf("stderr does not show the exception:\n%s", o.stderr)
				}
				for _, text := range []string{o.stderr, got.Traceback} {
					if strings.Contains(text, `"<string>"`) || strings.Contains(text, "_main") {
						t.Errorf("driver frames leak into the traceback:\n%s", text)
					}
					if !strings.Contains(text, tc.want.File+`", line `) {
						t.Errorf("traceback does not name the user's file %s:\n%s", tc.want.File, text)
					}
				}
				if rep.Result != nil {
					t.Errorf("result %q alongside an error", *rep.Result)
				}
			})
		}
	})
}

func TestDriverLastExpression(t *testing.T) {
	str := func(s string) *string { return &s }
	cases := []struct {
		name       string
		code       string
		eval       bool
		want       *string
		wantStdout string
	}{
		{"value returned, not printed", "x = 1\nx + 1\n", true, str("2"), ""},
		{"repr of a string", "'a' + 'b'\n", true, str("'ab'"), ""},
		{"non-ASCII and control characters survive", "'é\\x00\"\\\\ \\n'\n", true, str(`'é\x00"\\ \n'`), ""},
		{"None is not returned", "print('hi')\n", true, nil, "hi\n"},
		{"explicit None is not returned", "x = 3\nNone\n", true, nil, ""},
		{"last statement not an expression", "x = 1\ny = x\n", true, nil, ""},
		{"empty program", "", true, nil, ""},
		{"off unless asked", "print('a')\n1 + 1\n", false, nil, "a\n"},
		{"earlier expressions are not returned", "1\n2\nz = 3\n", true, nil, ""},
	}
	forEachPython(t, func(t *testing.T, py string) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				o := runDriver(t, py, map[string]string{"main.py": tc.code}, Options{EvalLastExpr: tc.eval}, "")
				rep := o.mustReport(t)
				if rep.Error != nil || o.exitCode != 0 {
					t.Fatalf("exit %d, error %+v; stderr:\n%s", o.exitCode, rep.Error, o.stderr)
				}
				switch {
				case tc.want == nil && rep.Result != nil:
					t.Errorf("result %q, want none", *rep.Result)
				case tc.want != nil && (rep.Result == nil || *rep.Result != *tc.want):
					t.Errorf("result %v, want %q", rep.Result, *tc.want)
				}
				if o.stdout != tc.wantStdout {
					t.Errorf("stdout %q, want %q", o.stdout, tc.wantStdout)
				}
			})
		}
	})
}

func TestDriverBehavesLikePythonMain(t *testing.T) {
	cases := []struct {
		name       string
		files      map[string]string
		entry      string
		args       []string
		stdin      string
		wantStdout string
		wantStderr string // substring
		wantExit   int
	}{
		{name: "__name__ is __main__",
			files:      map[string]string{"main.py": "if __name__ == '__main__':\n    print('main')\n"},
			wantStdout: "main\n"},
		{name: "sibling import",
			files:      map[string]string{"main.py": "from helper import x\nprint(x)\n", "helper.py": "x = 42\n"},
			wantStdout: "42\n"},
		{name: "entry in a subdirectory imports its siblings",
			files:      map[string]string{"app/run.py": "import util\nprint(util.name)\n", "app/util.py": "name = 'util'\n"},
			entry:      "app/run.py",
			wantStdout: "util\n"},
		{name: "user module shadows a stdlib module as with python main.py",
			files:      map[string]string{"main.py": "import json\nprint(json.MINE)\n", "json.py": "MINE = 'mine'\n"},
			wantStdout: "mine\n"},
		{name: "argv, __file__ and sys.path[0]",
			files: map[string]string{"main.py": "import os, sys\nprint(sys.argv)\n" +
				"print(__file__ == os.path.abspath('main.py'), sys.path[0] == os.getcwd())\n"},
			args:       []string{"a", "b c"},
			wantStdout: "['main.py', 'a', 'b c']\nTrue True\n"},
		{name: "stdin",
			files:      map[string]string{"main.py": "import sys\nprint(input()[::-1])\nprint(sys.stdin.read().upper(), end='')\n"},
			stdin:      "abc\nrest\n",
			wantStdout: "cba\nREST\n"},
		{name: "sys.exit(3)",
			files:    map[string]string{"main.py": "import sys\nprint('before')\nsys.exit(3)\nprint('after')\n"},
			wantExit: 3, wantStdout: "before\n"},
		{name: "sys.exit with a message",
			files:    map[string]string{"main.py": "import sys\nsys.exit('bye now')\n"},
			wantExit: 1, wantStderr: "bye now"},
		{name: "exit()",
			files:    map[string]string{"main.py": "exit(5)\n"},
			wantExit: 5},
		{name: "quit()",
			files:      map[string]string{"main.py": "print('q')\nquit()\nprint('not reached')\n"},
			wantStdout: "q\n"},
		{name: "SystemExit(None)",
			files: map[string]string{"main.py": "raise SystemExit\n"}},
		{name: "missing entry point",
			files:    map[string]string{"other.py": ""},
			wantExit: 2, wantStderr: "can't open file"},
		{name: "module docstring",
			files:      map[string]string{"main.py": "'''doc'''\nprint(__doc__)\n"},
			wantStdout: "doc\n"},
		{name: "driver names do not leak into globals",
			files:      map[string]string{"main.py": "print(sorted(k for k in globals() if not k.startswith('__')))\n"},
			wantStdout: "[]\n"},
	}
	forEachPython(t, func(t *testing.T, py string) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				o := runDriver(t, py, tc.files, Options{Entrypoint: tc.entry, Args: tc.args}, tc.stdin)
				rep := o.mustReport(t)
				if o.exitCode != tc.wantExit {
					t.Errorf("exit code %d, want %d; stderr:\n%s", o.exitCode, tc.wantExit, o.stderr)
				}
				if o.stdout != tc.wantStdout {
					t.Errorf("stdout %q, want %q", o.stdout, tc.wantStdout)
				}
				if !strings.Contains(o.stderr, tc.wantStderr) {
					t.Errorf("stderr %q does not contain %q", o.stderr, tc.wantStderr)
				}
				if tc.wantStderr == "" && o.stderr != "" {
					t.Errorf("unexpected stderr:\n%s", o.stderr)
				}
				if tc.wantExit != 2 && rep.Error != nil {
					t.Errorf("error reported for a clean exit: %+v", rep.Error)
				}
			})
		}
	})
}

func TestDriverKeyboardInterrupt(t *testing.T) {
	forEachPython(t, func(t *testing.T, py string) {
		o := runDriver(t, py, map[string]string{"main.py": "x = 1\nraise KeyboardInterrupt\n"}, Options{}, "")
		rep := o.mustReport(t)
		if o.signal != syscall.SIGINT {
			t.Errorf("process ended with exit %d signal %v, want death by SIGINT", o.exitCode, o.signal)
		}
		if rep.Error == nil || rep.Error.Name != "KeyboardInterrupt" || rep.Error.Line != 2 {
			t.Errorf("error %+v, want KeyboardInterrupt on line 2", rep.Error)
		}
		if n := strings.Count(o.stderr, "\nKeyboardInterrupt\n"); n != 1 {
			t.Errorf("traceback printed %d times:\n%s", n, o.stderr)
		}
	})
}

// TestDriverChannel covers what user code can do to the report channel.
func TestDriverChannel(t *testing.T) {
	cases := []struct {
		name     string
		code     string
		opts     Options
		wantErr  error // from ParseReport
		wantExit int
		check    func(t *testing.T, o outcome)
	}{
		{name: "report on a chosen descriptor", code: "1 + 2\n",
			opts: Options{ReportFD: 5, EvalLastExpr: true},
			check: func(t *testing.T, o outcome) {
				if o.report.Result == nil || *o.report.Result != "3" {
					t.Errorf("result %v, want 3", o.report.Result)
				}
			}},
		{name: "subprocesses do not inherit the channel",
			code: "import subprocess, sys\n" +
				"subprocess.run([sys.executable, '-c', 'import os; print(sorted(os.listdir(\"/proc/self/fd\")))'])\n",
			check: func(t *testing.T, o outcome) {
				if o.stdout != "['0', '1', '2', '3']\n" { // 3 is listdir's own descriptor
					t.Errorf("child descriptors %s, want only stdio", o.stdout)
				}
			}},
		{name: "the channel number is closed for user code",
			code: "import os\ntry:\n    os.fstat(3)\nexcept OSError:\n    print('closed')\n",
			check: func(t *testing.T, o outcome) {
				if o.stdout != "closed\n" {
					t.Errorf("stdout %q: fd 3 is still open", o.stdout)
				}
			}},
		{name: "os._exit leaves no report", code: "import os\nos._exit(4)\n",
			wantErr: ErrNoReport, wantExit: 4},
		{name: "closed channel leaves no report", code: "import os\nos.closerange(3, 1024)\n",
			wantErr: ErrNoReport},
		{name: "reused descriptor number does not receive the report",
			code: "import os\nos.closerange(3, 1024)\nfs = [open('f%d' % i, 'w') for i in range(8)]\n" +
				"for f in fs:\n    f.close()\nprint(sum(os.path.getsize('f%d' % i) for i in range(8)))\n",
			wantErr: ErrNoReport,
			check: func(t *testing.T, o outcome) {
				if o.stdout != "0\n" {
					t.Errorf("user files hold %s bytes, want 0", o.stdout)
				}
			}},
		{name: "forked child returning into the driver stays quiet",
			code: "import os\npid = os.fork()\nif pid:\n    os.waitpid(pid, 0)\n",
			check: func(t *testing.T, o outcome) {
				if n := bytes.Count(o.channel, []byte("\n")); n != 1 {
					t.Errorf("%d report lines, want 1: %q", n, o.channel)
				}
			}},
		{name: "huge result is truncated", code: "'x' * (3 << 20)\n",
			opts: Options{EvalLastExpr: true},
			check: func(t *testing.T, o outcome) {
				if !o.report.ResultTruncated || o.report.Result == nil || len(*o.report.Result) != 1<<20 {
					t.Errorf("truncated=%v len=%d, want a 1 MiB truncated result",
						o.report.ResultTruncated, len(*o.report.Result))
				}
			}},
		{name: "unencodable exception text", code: "raise ValueError('a\"b\\\\c\\n\\udc80')\n", wantExit: 1,
			check: func(t *testing.T, o outcome) {
				if o.report.Error == nil || o.report.Error.Value != "a\"b\\c\n\uFFFD" {
					t.Errorf("error %+v", o.report.Error)
				}
			}},
	}
	forEachPython(t, func(t *testing.T, py string) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				o := runDriver(t, py, map[string]string{"main.py": tc.code}, tc.opts, "")
				if tc.wantErr != nil {
					if !errors.Is(o.reportErr, tc.wantErr) {
						t.Errorf("ParseReport error %v, want %v; channel %q", o.reportErr, tc.wantErr, o.channel)
					}
				} else {
					o.mustReport(t)
				}
				if o.exitCode != tc.wantExit {
					t.Errorf("exit code %d, want %d; stderr:\n%s", o.exitCode, tc.wantExit, o.stderr)
				}
				if tc.check != nil {
					tc.check(t, o)
				}
			})
		}
	})
}

func TestDriverFitsOnArgv(t *testing.T) {
	if n := len(driverSource); n == 0 || n >= 32<<10 {
		t.Fatalf("driver is %d bytes, want 0 < n < 32 KiB", n)
	}
}
