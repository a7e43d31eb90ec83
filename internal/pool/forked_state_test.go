package pool

import (
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// TestForkedExecutionStartsClean: a forked execution warms up before its
// request arrives (forkserver.py, _warm), and nothing of that shows to the
// user's code: its modules, its globals and its descriptors are those of
// a warm jail's fresh interpreter, the first run of the kind (cold) shows
// the same, and what an interpreter does at exit still happens: exit
// callbacks run and files left open are written.
func TestForkedExecutionStartsClean(t *testing.T) {
	const probe = `import atexit, os, sys
print(sorted(sys.modules))
print(sorted(globals()))
print(sorted(os.listdir("/proc/self/fd")))
print(sys.stdout.line_buffering, sys.argv)
log = open("left-open.txt", "w")
log.write("written at exit")
atexit.register(print, "exit callback ran")
`
	seen := map[bool]string{}
	forEachMode(t, func(t *testing.T, fork bool) {
		p := newPool(t, Config{ForkServer: fork})
		s := spec(probe)
		s.Collect = &sandbox.Collect{}
		cold := run(t, p, s)
		warmUp(t, p, s)
		forked := p.Stats().ForkedRuns
		res := run(t, p, s)
		served(t, p, fork, forked)
		if res.Status != sandbox.StatusOK || res.ExitCode != 0 {
			t.Fatalf("status %s exit %d stderr %s", res.Status, res.ExitCode, res.Stderr)
		}
		if string(res.Stdout) != string(cold.Stdout) {
			t.Fatalf("a pooled execution sees another interpreter than a cold one:\npooled %s\ncold   %s",
				res.Stdout, cold.Stdout)
		}
		if !strings.HasSuffix(string(res.Stdout), "exit callback ran\n") {
			t.Fatalf("the exit callback did not run: %q", res.Stdout)
		}
		var left string
		for _, f := range res.Files {
			if f.Path == "left-open.txt" {
				left = string(f.Data)
			}
		}
		if left != "written at exit" {
			t.Fatalf("a file left open holds %q, files %v", left, res.Files)
		}
		seen[fork] = string(res.Stdout)
	})
	if len(seen) == 2 && seen[true] != seen[false] {
		t.Fatalf("a forked execution sees another interpreter than a warm jail's:\nforked %s\njail   %s",
			seen[true], seen[false])
	}
}
