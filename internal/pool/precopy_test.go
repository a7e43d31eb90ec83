package pool

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/runner"
	"github.com/pyexec/pyexec/internal/runner/runnertest"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// richPreload is what serve preloads, which the test environment has.
var richPreload = []string{"numpy", "pandas", "matplotlib", "matplotlib.pyplot"}

// richSpec runs code with an interpreter that has pandas and matplotlib.
func richSpec(t *testing.T, code string) sandbox.Spec {
	t.Helper()
	py, mount := runnertest.RichPython(t)
	s := spec(code)
	if mount != "" {
		s.Argv = runner.Argv(envTarget+"/bin/python3", runner.Options{Entrypoint: "main.py", EvalLastExpr: true})
		s.Mounts = []sandbox.Mount{{Source: mount, Target: envTarget}}
	} else {
		s.Argv = runner.Argv(py, runner.Options{Entrypoint: "main.py", EvalLastExpr: true})
	}
	return s
}

// number is the integer stdout holds after label.
func number(t *testing.T, res sandbox.Result, label string) int {
	t.Helper()
	m := regexp.MustCompile(label + ` (\d+)`).FindSubmatch(res.Stdout)
	if res.Status != sandbox.StatusOK || res.ExitCode != 0 || m == nil {
		t.Fatalf("status %s exit %d stdout %q stderr %s", res.Status, res.ExitCode, res.Stdout, res.Stderr)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// faultsSnippet is a pandas execution counting the page faults its own
// work takes (not the interpreter's start, which a forked one skips).
const faultsSnippet = `import resource
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
import numpy as np, pandas as pd
df = pd.DataFrame(np.random.default_rng(7).normal(size=(500, 3)), columns=["x", "y", "z"])
print(df.describe())
print(df.corr().round(2))
df.cumsum().plot()
print("faults", resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
`

// privateDirty prints the bytes the execution holds of its own as it starts.
const privateDirty = `for line in open("/proc/self/smaps_rollup"):
    if line.startswith("Private_Dirty:"):
        print("private", int(line.split()[1]) * 1024)
`

// TestForkedExecutionCopiesAhead: an execution forked from a fork server
// with preloads copies, while it waits, the pages such executions write:
// a pandas snippet then takes a fraction of the page faults it takes
// where the server copies nothing ahead, and gives the same output.
func TestForkedExecutionCopiesAhead(t *testing.T) {
	s := richSpec(t, faultsSnippet)
	faults := map[bool]int{}
	outputs := map[bool]string{}
	for _, ahead := range []bool{false, true} {
		cfg := Config{ForkServer: true, Preload: richPreload}
		if !ahead {
			cfg.PrecopyProbe = -1
		}
		p := newPool(t, cfg)
		runForked(t, p, s) // the first forked run may have met a fresh fork
		res, lean := runForked(t, p, s)
		if lean {
			t.Fatal("pandas code ran as lean")
		}
		faults[ahead] = number(t, res, "faults")
		outputs[ahead] = string(bytes.TrimRight(res.Stdout[:bytes.LastIndex(res.Stdout, []byte("faults"))], "\n"))
		waitForked(t, p)
		if st := p.Stats(); ahead != (st.Precopied > 0 && st.PrecopyMemory > 0) {
			t.Fatalf("copying ahead %v, but the pool's stats say %+v", ahead, st)
		}
	}
	t.Logf("page faults of the snippet: %d copying ahead, %d without", faults[true], faults[false])
	if faults[true]*3 >= faults[false] {
		t.Fatalf("copying ahead, the snippet took %d page faults; without, %d: want less than a third", faults[true], faults[false])
	}
	if outputs[true] != outputs[false] {
		t.Fatalf("the output differs:\ncopying ahead %s\nwithout %s", outputs[true], outputs[false])
	}
}

// waitForked waits for a ready forked execution of every kind used.
func waitForked(t *testing.T, p *Pool) {
	t.Helper()
	deadline := time.Now().Add(forkWait(t))
	for {
		st := p.Stats()
		if st.Forked >= st.Kinds {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no warm executions: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLeanAndPlainExecutionsCopyNothing: code that needs only the standard
// library copies nothing ahead, even forked from the server with preloads
// (no room for a lean server), and neither does any execution of a server
// whose environment has none of the preloads.
func TestLeanAndPlainExecutionsCopyNothing(t *testing.T) {
	t.Run("lean code from the full server", func(t *testing.T) {
		p := newPool(t, Config{ForkServer: true, Preload: richPreload, MaxForkServers: 1})
		runForked(t, p, richSpec(t, "import pandas\n"))
		full, _ := runForked(t, p, richSpec(t, "import pandas\n"+privateDirty))
		lean, wasLean := runForked(t, p, richSpec(t, privateDirty))
		if wasLean {
			t.Fatal("with room for one fork server, lean code forked from a lean one")
		}
		copied, off := copiedAhead(p)
		if copied == 0 {
			t.Fatalf("the server with preloads copies nothing ahead: %q", off)
		}
		f, l := number(t, full, "private"), number(t, lean, "private")
		t.Logf("own pages as the code starts: %d bytes (pandas code), %d (lean code); copied ahead %d", f, l, copied)
		if f-l < int(copied)/2 {
			t.Fatalf("lean code holds %d bytes as it starts, pandas code %d: want the %d copied ahead less", l, f, copied)
		}
	})
	t.Run("no preloads", func(t *testing.T) {
		p := newPool(t, Config{ForkServer: true, Preload: []string{"pyexec_no_such_module"}})
		runForked(t, p, spec("print(1)\n"))
		waitForked(t, p)
		if st := p.Stats(); st.Precopied != 0 || st.Forked == 0 {
			t.Fatalf("want forked executions, none copying ahead: %+v", st)
		}
	})
}

// copiedAhead is what the executions of p's fork server with preloads
// copy ahead, or why nothing.
func copiedAhead(p *Pool) (n int64, off string) {
	p.mu.Lock()
	var forks []*forking
	for _, f := range p.forks {
		forks = append(forks, f)
	}
	p.mu.Unlock()
	for _, f := range forks {
		f.mu.Lock()
		if f.full.tpl != nil && n == 0 {
			n, off = f.full.tpl.Precopy()
		}
		f.mu.Unlock()
	}
	return n, off
}

// logBuffer is a slog handler's writer that tests read concurrently.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestFailedProbeLeavesTheServerServing: a fork server whose probe fails
// (here: out of time at once) says so, serves every execution all the
// same, and its executions copy nothing ahead.
func TestFailedProbeLeavesTheServerServing(t *testing.T) {
	var logs logBuffer
	p := newPool(t, Config{ForkServer: true, Preload: richPreload, PrecopyProbe: time.Nanosecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	s := richSpec(t, "import pandas as pd\nprint(pd.DataFrame({'a': [1, 2]}).a.sum())\n")
	for range 3 {
		res, _ := runForked(t, p, s)
		if res.Status != sandbox.StatusOK || res.ExitCode != 0 || string(res.Stdout) != "3\n" {
			t.Fatalf("status %s exit %d stdout %q stderr %s", res.Status, res.ExitCode, res.Stdout, res.Stderr)
		}
	}
	waitForked(t, p)
	if st := p.Stats(); st.Precopied != 0 {
		t.Fatalf("executions copied ahead after the probe failed: %+v", st)
	}
	if got := logs.String(); !strings.Contains(got, "copy nothing ahead") || !strings.Contains(got, "probe took longer") {
		t.Fatalf("the log does not say why nothing is copied ahead:\n%s", got)
	}
}

// TestCopyingAheadLeavesNothingBehind: what an execution copied ahead is
// pages, nothing else: its code sees the same modules, globals and
// descriptors as an execution of a server that copies nothing ahead.
func TestCopyingAheadLeavesNothingBehind(t *testing.T) {
	s := richSpec(t, `import os, sys, pandas
print(sorted(sys.modules))
print(sorted(globals()))
print(sorted(os.listdir("/proc/self/fd")))
print(sys.stdout.line_buffering, sys.argv)
`)
	seen := map[bool]string{}
	for _, ahead := range []bool{false, true} {
		cfg := Config{ForkServer: true, Preload: richPreload}
		if !ahead {
			cfg.PrecopyProbe = -1
		}
		p := newPool(t, cfg)
		runForked(t, p, s)
		res, _ := runForked(t, p, s)
		if res.Status != sandbox.StatusOK || res.ExitCode != 0 {
			t.Fatalf("status %s exit %d stderr %s", res.Status, res.ExitCode, res.Stderr)
		}
		if n, _ := copiedAhead(p); ahead != (n > 0) {
			t.Fatalf("copying ahead %v, but the server copies %d bytes", ahead, n)
		}
		seen[ahead] = string(res.Stdout)
	}
	if seen[true] != seen[false] {
		t.Fatalf("copying ahead, the code sees another interpreter:\ncopying %s\nwithout %s", seen[true], seen[false])
	}
}

// TestSmallMemoryLimitGetsAnExecutionThatCopiedNothing: a request whose
// memory limit leaves no room for the pages executions copy ahead is not
// handed one that holds them (lowering its limit below them would end
// it): it runs forked all the same, in an execution that copied nothing.
func TestSmallMemoryLimitGetsAnExecutionThatCopiedNothing(t *testing.T) {
	p := newPool(t, Config{ForkServer: true, Preload: richPreload})
	runForked(t, p, richSpec(t, "import pandas\n"))
	waitForked(t, p)
	copied, off := copiedAhead(p)
	if copied == 0 {
		t.Fatalf("the server with preloads copies nothing ahead: %q", off)
	}
	s := richSpec(t, "import pandas as pd\nprint(pd.Series([1, 2]).sum())\n"+privateDirty)
	s.Limits.MemoryBytes = copied * 3 / 4
	res, _ := runForked(t, p, s)
	if got := number(t, res, "private"); int64(got) >= copied {
		t.Fatalf("with a limit of %d bytes, it held %d of its own as it started", s.Limits.MemoryBytes, got)
	}
	if !strings.HasPrefix(string(res.Stdout), "3\n") {
		t.Fatalf("stdout %q", res.Stdout)
	}
}

// TestProbeRunsWithAnExecutionsCredentials: the libraries the probe drives
// are the environment's (a request's requirements may choose them), so it
// drives them as an execution would run: not as root, without
// capabilities, with no_new_privs and the seccomp filter. Here the
// environment's numpy says, when the probe calls it, what it runs with.
func TestProbeRunsWithAnExecutionsCredentials(t *testing.T) {
	env := preloadEnv(t, "")
	sites, err := filepath.Glob(filepath.Join(env, "lib", "python3*", "site-packages"))
	if err != nil || len(sites) != 1 {
		t.Fatalf("the venv's site-packages: %v %v", sites, err)
	}
	fake := `import os, sys
def arange(*args, **kwargs):
    f = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
    sys.stderr.write("probe-creds uid=%d capeff=%s nnp=%s seccomp=%s\n" % (
        os.getuid(), f["CapEff"].strip(), f["NoNewPrivs"].strip(), f["Seccomp"].strip()))
    sys.stderr.flush()
    raise RuntimeError("not numpy")
`
	if err := os.WriteFile(filepath.Join(sites[0], "numpy.py"), []byte(fake), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	p := newPool(t, Config{ForkServer: true, Preload: []string{"numpy"},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if res, _ := runForked(t, p, envSpec(env, "import numpy\nprint(1)\n")); string(res.Stdout) != "1\n" {
		t.Fatalf("stdout %q stderr %s", res.Stdout, res.Stderr)
	}
	m := regexp.MustCompile(`probe-creds uid=(\d+) capeff=([0-9a-f]+) nnp=(\d) seccomp=(\d)`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("the probe did not call the environment's numpy:\n%s", logs.String())
	}
	if m[1] == "0" || strings.Trim(m[2], "0") != "" || m[3] != "1" || m[4] != "2" {
		t.Fatalf("the probe drove the environment's libraries with uid %s, capabilities %s, no_new_privs %s, seccomp mode %s", m[1], m[2], m[3], m[4])
	}
}
