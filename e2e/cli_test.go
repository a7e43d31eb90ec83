package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/client"
)

func writeScript(t *testing.T, name, code string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCLI runs the built CLI against a real server as a user would.
func TestCLI(t *testing.T) {
	needRoot(t)
	s := startServer(t, t.TempDir())
	hello := writeScript(t, "hello.py", "import sys\nprint('hello', *sys.argv[1:])\nprint('to stderr', file=sys.stderr)\n")
	boom := writeScript(t, "boom.py", "print('before')\nx = 1\nraise ValueError('bad value')\n")
	exit3 := writeScript(t, "exit3.py", "import sys\nsys.exit(3)\n")
	sleepy := writeScript(t, "sleepy.py", "import time\nprint('started', flush=True)\ntime.sleep(30)\n")

	cases := []struct {
		name       string
		stdin      string
		args       []string
		code       int
		stdout     string // exact, unless stdoutRE is set
		stdoutRE   string
		stderrHave []string
		stderrNoRE string // a pattern stderr must not match
	}{
		{name: "run a file", args: []string{"run", hello}, stdout: "hello\n", stderrHave: []string{"to stderr"}},
		{name: "script args after --", args: []string{"run", hello, "--", "a", "b c"}, stdout: "hello a b c\n"},
		{name: "stdin becomes main.py", stdin: "print(6*7)\n", args: []string{"run"}, stdout: "42\n"},
		{name: "exception exits 1", args: []string{"run", boom}, code: 1, stdout: "before\n",
			// As python-executor's CLI: the traceback, and no "Error:" line
			// after it (a completed result has no error).
			stderrHave: []string{`boom.py", line 3`, "ValueError: bad value"}, stderrNoRE: `(?m)^Error:`},
		{name: "exit code passes through", args: []string{"run", exit3}, code: 3},
		{name: "quiet prints only stdout", args: []string{"run", "-q", hello}, stdout: "hello\n"},
		{name: "verbose header", args: []string{"run", "-v", hello}, stdout: "hello\n",
			stderrHave: []string{"Execution ID: exe_", "Status: completed", "Duration: ", "---"}},
		{name: "timeout exits 124 with partial output", args: []string{"run", "--timeout", "1", sleepy}, code: 124,
			stdout: "started\n", stderrHave: []string{"Error: execution timeout after 1s"}},
		{name: "eval prints the value", args: []string{"eval", "1 + 1"}, stdout: "2\n"},
		{name: "eval reads stdin", stdin: "x = 20\nx * 2\n", args: []string{"eval"}, stdout: "40\n"},
		{name: "eval --python", args: []string{"eval", "--python", "3.10", "import sys; sys.version_info[:2]"}, stdout: "(3, 10)\n"},
		{name: "unknown python version", args: []string{"eval", "--python", "2.7", "1"}, code: 1,
			stderrHave: []string{`unsupported python_version "2.7"; supported versions:`}},
		{name: "submit prints an id", args: []string{"submit", hello}, stdoutRE: `^exe_[0-9a-f-]{36}\n$`},
		{name: "version", args: []string{"version"}, stdoutRE: `^pyexec `},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := cli(t, s.url, c.stdin, c.args...)
			if r.code != c.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, c.code, r.stdout, r.stderr)
			}
			if c.stdoutRE != "" {
				if !regexp.MustCompile(c.stdoutRE).MatchString(r.stdout) {
					t.Errorf("stdout %q does not match %s", r.stdout, c.stdoutRE)
				}
			} else if r.stdout != c.stdout {
				t.Errorf("stdout %q, want %q (stderr %s)", r.stdout, c.stdout, r.stderr)
			}
			for _, w := range c.stderrHave {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
			if c.stderrNoRE != "" && regexp.MustCompile(c.stderrNoRE).MatchString(r.stderr) {
				t.Errorf("stderr matches %s:\n%s", c.stderrNoRE, r.stderr)
			}
		})
	}
}

// TestCLISubmitFollowKill: submit runs in the background, follow streams it
// live and exits with its code, kill stops a runaway one (137).
func TestCLISubmitFollowKill(t *testing.T) {
	needRoot(t)
	s := startServer(t, t.TempDir())
	counted := writeScript(t, "count.py", "import time, sys\nfor i in range(3):\n    print('tick', i, flush=True)\n    time.sleep(0.2)\nsys.exit(5)\n")
	id := strings.TrimSpace(cli(t, s.url, "", "submit", counted).stdout)
	f := cli(t, s.url, "", "follow", id)
	if f.code != 5 || f.stdout != "tick 0\ntick 1\ntick 2\n" {
		t.Fatalf("follow: exit %d stdout %q stderr %s", f.code, f.stdout, f.stderr)
	}

	// The runaway names its processes (comm, inherited by its children), so
	// the test tells them from the warm pool's idle interpreters.
	runaway := writeScript(t, "runaway.py", "import ctypes, os\nctypes.CDLL(None).prctl(15, b'runaway')\nprint('spinning', flush=True)\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        while True: pass\n    os._exit(0)\nwhile True: pass\n")
	id = strings.TrimSpace(cli(t, s.url, "", "submit", "--timeout", "60", runaway).stdout)
	if !strings.Contains(cli(t, s.url, "", "executions", "list", "--status", "running").stdout, id) &&
		!strings.Contains(cli(t, s.url, "", "executions", "list", "--status", "pending").stdout, id) {
		t.Fatalf("%s is neither pending nor running", id)
	}
	waitForOutput(t, s.url, id, "spinning")
	if k := cli(t, s.url, "", "kill", id); k.code != 0 {
		t.Fatalf("kill: exit %d: %s", k.code, k.stderr)
	}
	f = cli(t, s.url, "", "follow", id)
	if f.code != 137 || !strings.Contains(f.stdout, "spinning") {
		t.Fatalf("follow after kill: exit %d stdout %q stderr %s", f.code, f.stdout, f.stderr)
	}
	eventually(t, 10*time.Second, "no process of the killed run", func() bool { return len(jailProcesses("runaway")) == 0 })
	// Killed stays killed.
	time.Sleep(300 * time.Millisecond)
	if r := cli(t, s.url, "", "follow", id); r.code != 137 {
		t.Fatalf("status changed after kill: exit %d %s", r.code, r.stderr)
	}
}

// waitForOutput follows execution id until its stdout contains want.
func waitForOutput(t *testing.T, url, id, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var seen strings.Builder
	for ev, err := range client.New(url).Follow(ctx, id) {
		if err != nil {
			t.Fatalf("following %s: %v (stdout so far %q)", id, err, seen.String())
		}
		if ev.Type == client.EventStdout {
			seen.WriteString(ev.Data)
			if strings.Contains(seen.String(), want) {
				return
			}
		}
	}
	t.Fatalf("%s ended without printing %q", id, want)
}
