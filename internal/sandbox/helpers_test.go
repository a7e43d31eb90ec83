package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/runner"
)

// python is the interpreter the privileged tests run in jails. It lives
// under /usr, which every jail mounts.
const python = "/usr/bin/python3"

// testParent is the cgroup parent of this test binary's jails, so that
// the leftover checks see only them: other packages' tests build jails in
// parallel under the default parent.
var testParent = fmt.Sprintf("pyexec-test-%d", os.Getpid())

// needJail skips a test that needs to build real jails, with the reason.
func needJail(t testing.TB) *Manager {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: builds namespaces, cgroups and mounts (CI runs as root)")
	}
	if _, err := os.Stat(python); err != nil {
		t.Skipf("needs %s: %v", python, err)
	}
	// A few spares: the suites run their jails in reused cgroups too.
	m, err := New(Config{CgroupParent: testParent, SpareCgroups: 2})
	if err != nil {
		t.Fatalf("sandbox.New: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Manager.Close: %v", err)
		}
	})
	return m
}

// pyOpt adjusts the spec of one hostile program.
type pyOpt func(*Spec)

func withLimits(l Limits) pyOpt { return func(s *Spec) { s.Limits = l } }

func withFiles(f ...File) pyOpt { return func(s *Spec) { s.Files = append(s.Files, f...) } }

// runPy runs code with the jail's python and fails the test on an invalid
// spec; every other outcome is for the caller to judge.
func runPy(t testing.TB, m *Manager, code string, opts ...pyOpt) Result {
	t.Helper()
	spec := Spec{
		Argv:   []string{python, "-c", code},
		Env:    testEnv,
		Limits: Limits{WallTime: 20 * time.Second},
	}
	for _, o := range opts {
		o(&spec)
	}
	if spec.Limits.WallTime == 0 {
		spec.Limits.WallTime = 20 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := m.Run(ctx, spec, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Status == StatusSetupError {
		t.Fatalf("setup error: %s", res.Reason)
	}
	return res
}

// silentWaiter stands in for the runner's warm mode: started ahead of its
// work, it blocks on its request pipe (fd 4) and runs the code it is sent.
// Like the runner driver, it runs _main itself only as __main__: a fork
// server loads it once and calls _main in each execution.
// fetchChannel is Python that sets CH to the result channel as the jail's
// PID 1 serves it (relay_linux.go) and TAGS to what the relay handed out.
const fetchChannel = `import os, socket
_s = socket.socket(socket.AF_UNIX)
_s.connect(os.environ["PYEXEC_RELAY"])
TAGS, _fds, _, _ = socket.recv_fds(_s, 8, 2)
_s.close()
CH = _fds[TAGS.index(b"c")]
`

const silentWaiter = `import os
def _main():
    code = b""
    while True:
        chunk = os.read(4, 65536)
        if not chunk:
            break
        code += chunk
    os.close(4)
    exec(compile(code, "<string>", "exec"), globals())
if __name__ == "__main__":
    _main()
`

// runWarm runs code as runPy does, but in a jail whose interpreter started
// first with generous ceilings and got the code and the real limits at
// hand-off.
func runWarm(t testing.TB, m *Manager, code string, opts ...pyOpt) Result {
	t.Helper()
	spec := Spec{Env: testEnv, Limits: Limits{WallTime: 20 * time.Second}}
	for _, o := range opts {
		o(&spec)
	}
	ceilings := ceilingsFor(spec)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	j, err := m.Prepare(ctx, Base{})
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	defer j.Close()
	p, err := j.Start(ctx, Spec{Argv: []string{python, "-c", silentWaiter}, Env: spec.Env, Requests: true, Limits: ceilings}, nil)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return handOff(t, p, spec, code)
}

// handOff gives a waiting payload code with spec's limits and files, and
// returns its Result; a setup error fails the test.
func handOff(t testing.TB, p *Process, spec Spec, code string) Result {
	t.Helper()
	if err := p.HandOff(spec.Limits, spec.Files, []byte(code)); err != nil {
		t.Fatalf("HandOff: %v", err)
	}
	p.CloseStdin()
	res := p.Wait()
	if res.Status == StatusSetupError {
		t.Fatalf("setup error: %s", res.Reason)
	}
	return res
}

// ceilingsFor are the limits a warm or forked payload starts with so that
// spec's limits can be handed to it.
func ceilingsFor(spec Spec) Limits {
	l := spec.Limits.WithDefaults()
	d := DefaultLimits()
	ceilings := l
	ceilings.MemoryBytes = max(l.MemoryBytes, d.MemoryBytes)
	ceilings.Pids = max(l.Pids, d.Pids)
	ceilings.CPUs = max(l.CPUs, d.CPUs)
	ceilings.WorkspaceBytes = max(l.WorkspaceBytes, d.WorkspaceBytes)
	ceilings.WorkspaceInodes = max(l.WorkspaceInodes, d.WorkspaceInodes)
	ceilings.ShmBytes = max(l.ShmBytes, d.ShmBytes)
	ceilings.WallTime, ceilings.CPUTime = time.Hour, time.Hour
	return ceilings
}

// testEnv is the environment of every test payload.
var testEnv = []string{"PATH=/usr/bin:/bin", "HOME=/work", "PYTHONDONTWRITEBYTECODE=1"}

// startTemplate starts a fork server whose executions run silentWaiter,
// after preloading preload; it is closed with the test.
func startTemplate(t testing.TB, m *Manager, preload ...string) *Template {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tpl, err := m.StartTemplate(ctx, Spec{Argv: runner.ForkServerArgv(python, preload), Stdin: runner.ForkServerStdin(silentWaiter), Env: testEnv,
		Limits: Limits{WallTime: 24 * time.Hour, CPUTime: 24 * time.Hour}}, nil)
	if err != nil {
		t.Fatalf("StartTemplate: %v", err)
	}
	t.Cleanup(func() { tpl.Close() })
	return tpl
}

// forked returns a runner of code in executions forked from tpl, which get
// the code and the real limits at hand-off like warm ones.
func forked(tpl *Template) func(t testing.TB, m *Manager, code string, opts ...pyOpt) Result {
	return func(t testing.TB, m *Manager, code string, opts ...pyOpt) Result {
		t.Helper()
		spec := Spec{Env: testEnv, Limits: Limits{WallTime: 20 * time.Second}}
		for _, o := range opts {
			o(&spec)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		j, p, err := tpl.Fork(ctx, Spec{Argv: []string{python}, Env: spec.Env, Requests: true, Limits: ceilingsFor(spec)}, nil)
		if err != nil {
			t.Fatalf("Fork: %v", err)
		}
		defer j.Close()
		return handOff(t, p, spec, code)
	}
}

// jailProcesses lists host pids that are still inside a jail cgroup.
func jailProcesses() []string {
	var left []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil {
			continue
		}
		if strings.Contains(string(b), "/"+testParent+"/") {
			cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			left = append(left, e.Name()+" "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return left
}

// processesLeft lists the jail processes that are not in before, once
// the exited ones among them are reaped: a forked execution's reaper is
// the fork server's child, which reaps it on SIGCHLD a moment after the
// execution's cgroup is gone. A process that still runs is listed at once.
func processesLeft(before []string) []string {
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := without(jailProcesses(), before)
		if len(left) == 0 || !allZombies(left) || time.Now().After(deadline) {
			return left
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// allZombies reports whether every "pid cmdline" entry names a process
// that has exited and waits to be reaped.
func allZombies(entries []string) bool {
	for _, e := range entries {
		pid, _, _ := strings.Cut(e, " ")
		b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
		if err != nil {
			continue // reaped meanwhile
		}
		// The state follows the parenthesized command name.
		if i := strings.LastIndexByte(string(b), ')'); i < 0 || !strings.HasPrefix(string(b[i+1:]), " Z") {
			return false
		}
	}
	return true
}

// jailCgroups lists jail cgroups that still exist below this binary's
// parent in the v1 hierarchies or the v2 tree.
func jailCgroups() []string {
	var left []string
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if filepath.Base(filepath.Dir(p)) == testParent {
			left = append(left, p)
			return filepath.SkipDir
		}
		return nil
	})
	return left
}

// leftovers reports anything a jail left on the host.
func leftovers() []string {
	var out []string
	for _, p := range jailProcesses() {
		out = append(out, "process "+p)
	}
	for _, c := range jailCgroups() {
		out = append(out, "cgroup "+c)
	}
	tmp, _ := filepath.Glob(filepath.Join(os.TempDir(), "pyexec-work-*"))
	for _, d := range tmp {
		out = append(out, "temp dir "+d)
	}
	return out
}

func writeTestModule(dir string) error {
	return os.WriteFile(filepath.Join(dir, "depmod.py"), []byte("VALUE = 42\n"), 0o644)
}

// quote renders s as a Python string literal.
func quote(s string) string { return strconv.Quote(s) }

// ioPipe is an in-memory pipe for protocol tests.
func ioPipe() (*io.PipeReader, *io.PipeWriter) { return io.Pipe() }

// removeTestParents removes this binary's (empty) cgroup parents.
func removeTestParents() {
	var dirs []string
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == testParent {
			dirs = append(dirs, p)
			return filepath.SkipDir
		}
		return nil
	})
	for _, d := range dirs {
		_ = os.Remove(d)
	}
}
