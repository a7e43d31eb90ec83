package pool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/runner"
	"github.com/pyexec/pyexec/internal/runner/runnertest"
	"github.com/pyexec/pyexec/internal/sandbox"
)

func TestMain(m *testing.M) {
	if sandbox.IsInit() {
		os.Exit(sandbox.Init())
	}
	code := m.Run()
	removeCgroupParent()
	os.Exit(code)
}

// testParent is the cgroup parent of this test binary's jails.
func testParent() string { return fmt.Sprintf("pyexec-pooltest-%d", os.Getpid()) }

// removeCgroupParent removes the test parent's directories in every v1
// hierarchy or the v2 tree, giving jails released in the background a few
// seconds to go first.
func removeCgroupParent() {
	var dirs []string
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == testParent() {
			dirs = append(dirs, p)
			return filepath.SkipDir
		}
		return nil
	})
	deadline := time.Now().Add(5 * time.Second)
	for _, d := range dirs {
		for {
			err := os.Remove(d)
			if err == nil || errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

const python = "/usr/bin/python3"

var baseEnv = []string{"PATH=/usr/bin:/bin", "HOME=/work", "LANG=C.UTF-8"}

// newPool builds a pool over real jails, or skips with the reason.
func newPool(t *testing.T, cfg Config) *Pool {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: builds real jails (CI runs as root)")
	}
	if _, err := os.Stat(python); err != nil {
		t.Skipf("needs %s", python)
	}
	if cfg.TrustedMount == nil {
		// The tests' environments stand for the base environment, whose
		// packages the operator chose (TestUntrustedMountsDoNotFork).
		cfg.TrustedMount = func(string) bool { return true }
	}
	// A few spares: the pool's jails run in reused cgroups too.
	m, err := sandbox.New(sandbox.Config{CgroupParent: testParent(), SpareCgroups: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the pool's Close below
		if err := m.Close(); err != nil {
			t.Errorf("Manager.Close: %v", err)
		}
	})
	cfg.BaseEnv = baseEnv
	p := New(m, cfg)
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// spec is what the engine builds for main.py = code.
func spec(code string, extraEnv ...string) sandbox.Spec {
	return sandbox.Spec{
		Argv:          runner.Argv(python, runner.Options{Entrypoint: "main.py", EvalLastExpr: true}),
		Env:           append(append([]string(nil), baseEnv...), extraEnv...),
		Dir:           sandbox.WorkDir,
		Files:         []sandbox.File{{Path: "main.py", Data: []byte(code)}},
		ResultChannel: true,
	}
}

// warmUp runs s once (cold: the kind is new) and waits for a warm jail.
func warmUp(t *testing.T, p *Pool, s sandbox.Spec) {
	t.Helper()
	if _, err := p.Run(context.Background(), s, nil); err != nil {
		t.Fatal(err)
	}
	waitReady(t, p)
}

// waitReady waits until p has a warm jail ready. A fork server loads its
// interpreter first: under emulation (TCG) on a busy host that alone
// takes tens of seconds.
func waitReady(t *testing.T, p *Pool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for p.Stats().Warm == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no warm jail after 60s: %+v", p.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func run(t *testing.T, p *Pool, s sandbox.Spec) sandbox.Result {
	t.Helper()
	res, err := p.Run(context.Background(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// forEachMode runs f with warm jails and with a fork server.
func forEachMode(t *testing.T, f func(t *testing.T, fork bool)) {
	t.Run("jails", func(t *testing.T) { f(t, false) })
	t.Run("forked", func(t *testing.T) { f(t, true) })
}

// served checks that the last execution went the way fork says.
func served(t *testing.T, p *Pool, fork bool, forkedBefore int64) {
	t.Helper()
	if got := p.Stats().ForkedRuns - forkedBefore; fork != (got > 0) {
		t.Fatalf("fork server %v, but %d executions were forked: %+v", fork, got, p.Stats())
	}
}

// TestWarmExecutionRunsTheRequest: a pooled execution is served by a warm
// jail and gives the same result a cold one would.
func TestWarmExecutionRunsTheRequest(t *testing.T) {
	forEachMode(t, func(t *testing.T, fork bool) {
		p := newPool(t, Config{ForkServer: fork})
		s := spec("import os, sys\nprint(os.environ['GREETING'], sys.argv, os.getcwd())\n6 * 7\n", "GREETING=hi")
		warmUp(t, p, s)
		before, forked := p.Stats().Hits, p.Stats().ForkedRuns
		res := run(t, p, s)
		if p.Stats().Hits != before+1 {
			t.Fatalf("not served warm: %+v", p.Stats())
		}
		served(t, p, fork, forked)
		if res.Status != sandbox.StatusOK || string(res.Stdout) != "hi ['main.py'] /work\n" {
			t.Fatalf("status %s stdout %q stderr %s", res.Status, res.Stdout, res.Stderr)
		}
		rep, err := runner.ParseReport(res.Channel)
		if err != nil || rep.Result == nil || *rep.Result != "42" {
			t.Fatalf("report %+v err %v", rep, err)
		}
	})
}

// TestNothingCarriesOverBetweenWarmExecutions: a variable, a file, a
// process or an RNG state of one execution is never visible to the next.
func TestNothingCarriesOverBetweenWarmExecutions(t *testing.T) {
	forEachMode(t, func(t *testing.T, fork bool) {
		p := newPool(t, Config{ForkServer: fork})
		first := spec(`import os, random, time
secret = "first"
for d in ("/work", "/tmp", "/dev/shm"):
    open(d + "/left", "w").write("x")
if os.fork() == 0:
    os.setsid()
    while True: time.sleep(1)
print(random.getrandbits(64))
`)
		second := spec(`import os, random
print("secret" in globals(), [d for d in ("/work", "/tmp", "/dev/shm") if os.path.exists(d + "/left")],
      len([x for x in os.listdir("/proc") if x.isdigit()]))
print(random.getrandbits(64))
`)
		warmUp(t, p, first)
		a := run(t, p, first)
		deadline := time.Now().Add(20 * time.Second)
		for p.Stats().Warm == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		hits, forked := p.Stats().Hits, p.Stats().ForkedRuns
		b := run(t, p, second)
		served(t, p, fork, forked)
		if p.Stats().Hits != hits+1 {
			t.Fatalf("second run not served warm: %+v", p.Stats())
		}
		lines := strings.Split(strings.TrimSpace(string(b.Stdout)), "\n")
		if len(lines) != 2 || lines[0] != "False [] 2" {
			t.Fatalf("second execution saw the first's state: %q (stderr %s)", b.Stdout, b.Stderr)
		}
		if strings.TrimSpace(string(a.Stdout)) == lines[1] {
			t.Fatalf("two executions share RNG state: %s", lines[1])
		}
	})
}

// TestHandOffLimitsAreEnforced: a warm jail started with the pool's
// ceilings enforces the smaller limits of the execution it is handed.
func TestHandOffLimitsAreEnforced(t *testing.T) {
	forEachMode(t, func(t *testing.T, fork bool) {
		p := newPool(t, Config{Ceilings: sandbox.Limits{MemoryBytes: 512 << 20}, ForkServer: fork})
		s := spec("print('warm')\n")
		warmUp(t, p, s)
		hog := spec("x = bytearray(200 << 20)\nprint('allocated')\n")
		hog.Limits.MemoryBytes = 64 << 20
		hits, forked := p.Stats().Hits, p.Stats().ForkedRuns
		res := run(t, p, hog)
		served(t, p, fork, forked)
		if p.Stats().Hits != hits+1 {
			t.Fatalf("not served warm: %+v", p.Stats())
		}
		if res.Status != sandbox.StatusOOM || strings.Contains(string(res.Stdout), "allocated") {
			t.Fatalf("a warm jail given 64 MiB allocated 200 MiB: %s %q", res.Status, res.Stdout)
		}
	})
}

// TestWarmWorkspaceHasTheSizeAskedFor: a warm jail's /work starts at
// ScratchBytes; a request asking for that gets it as it is, one asking
// for more (up to the ceiling) or less gets its own size, warm.
func TestWarmWorkspaceHasTheSizeAskedFor(t *testing.T) {
	forEachMode(t, func(t *testing.T, fork bool) {
		p := newPool(t, Config{Ceilings: sandbox.Limits{WorkspaceBytes: 128 << 20}, ScratchBytes: 32 << 20, ForkServer: fork})
		code := "import os\nfor d in ('/work', '/tmp'):\n    s = os.statvfs(d); print(d, s.f_blocks * s.f_frsize >> 20)\n"
		s := spec(code)
		s.Limits.WorkspaceBytes = 32 << 20
		warmUp(t, p, s)
		for _, mib := range []int64{32, 128, 8} {
			s := spec(code)
			s.Limits.WorkspaceBytes = mib << 20
			waitReady(t, p)
			hits := p.Stats().Hits
			res := run(t, p, s)
			if p.Stats().Hits != hits+1 {
				t.Fatalf("%d MiB: not served warm: %+v", mib, p.Stats())
			}
			if want := fmt.Sprintf("/work %d\n/tmp %d\n", mib, mib); string(res.Stdout) != want {
				t.Errorf("%d MiB asked: %q, want %q (stderr %s)", mib, res.Stdout, want, res.Stderr)
			}
		}
	})
}

// TestColdFallback: what a warm jail cannot serve runs cold, correctly.
func TestColdFallback(t *testing.T) {
	p := newPool(t, Config{Ceilings: sandbox.Limits{MemoryBytes: 256 << 20}})
	cases := []struct {
		name string
		spec sandbox.Spec
		want string
	}{
		{"not the runner", sandbox.Spec{Argv: []string{python, "-c", "print('plain')"}, Env: baseEnv}, "plain\n"},
		{"start-up variable", spec("import sys\nprint(sys.flags.optimize)\n", "PYTHONOPTIMIZE=1"), "1\n"},
		{"above the ceilings", func() sandbox.Spec {
			s := spec("print('big')\n")
			s.Limits.MemoryBytes = 1 << 30
			return s
		}(), "big\n"},
		// Network without an egress runs cold, in a jail with no route
		// out (network_test.go has warm jails with their egress).
		{"network", func() sandbox.Spec {
			s := spec("import socket\nprint([n for _, n in socket.if_nameindex()])\n")
			s.Network = true
			return s
		}(), "['lo']\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cold := p.Stats().Cold
			res := run(t, p, c.spec)
			if res.Status != sandbox.StatusOK || string(res.Stdout) != c.want {
				t.Fatalf("status %s (%s) stdout %q stderr %s", res.Status, res.Reason, res.Stdout, res.Stderr)
			}
			if p.Stats().Cold != cold+1 {
				t.Fatalf("not run cold: %+v", p.Stats())
			}
		})
	}
}

// TestWorkspaceRunsCold: an execution with a workspace never takes a warm
// jail, which would run it without its /workspace; on jails without
// workspace slots it fails before its code runs.
func TestWorkspaceRunsCold(t *testing.T) {
	p := newPool(t, Config{})
	s := spec("print('ran')\n")
	warmUp(t, p, s)
	cold := p.Stats().Cold
	s.Workspace = &sandbox.WorkspaceMount{Lower: "/nonexistent", ReadOnly: true}
	res := run(t, p, s)
	if res.Status != sandbox.StatusSetupError || !strings.Contains(res.Reason, "not enabled") || len(res.Stdout) > 0 {
		t.Fatalf("status %s (%s) stdout %q: want a setup error before the code ran", res.Status, res.Reason, res.Stdout)
	}
	if p.Stats().Cold != cold+1 {
		t.Fatalf("not run cold: %+v", p.Stats())
	}
}

// TestCancelKillsAWarmExecution: cancelling the request kills the run.
func TestCancelKillsAWarmExecution(t *testing.T) {
	forEachMode(t, func(t *testing.T, fork bool) {
		p := newPool(t, Config{ForkServer: fork})
		s := spec("while True: pass\n")
		warmUp(t, p, spec("pass\n"))
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		res, err := p.Run(ctx, s, nil)
		if err != nil || res.Status != sandbox.StatusKilled {
			t.Fatalf("status %s err %v", res.Status, err)
		}
	})
}

// TestIdleKindsShrink: a kind nobody uses goes cold and frees its jails.
func TestIdleKindsShrink(t *testing.T) {
	forEachMode(t, func(t *testing.T, fork bool) {
		p := newPool(t, Config{Idle: 400 * time.Millisecond, ForkServer: fork})
		s := spec("pass\n")
		// Building the first warm jail or fork server takes longer than
		// Idle on a slow (emulated) host: steady traffic keeps the kind in
		// use until it is ready; then nobody uses it.
		stop := keepInUse(t, p, s)
		warmUp(t, p, s)
		stop()
		// A forked execution shares its pages with the fork server, whose
		// cgroup holds them: together they must be reported.
		if st := p.Stats(); st.WarmMemory+st.TemplateMemory <= 0 {
			t.Errorf("idle memory not reported: %+v", st)
		}
		deadline := time.Now().Add(10 * time.Second)
		for p.Stats().Kinds > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("idle kind still warm: %+v", p.Stats())
			}
			time.Sleep(50 * time.Millisecond)
		}
		if st := p.Stats(); st.Warm != 0 || st.Templates != 0 {
			t.Fatalf("warm jails or fork servers left: %+v", st)
		}
	})
}

// keepInUse marks the kind of s used every few milliseconds, as steady
// traffic would, until the returned func is called.
func keepInUse(t *testing.T, p *Pool, s sandbox.Spec) (stop func()) {
	t.Helper()
	warmArgv, _, ok := runner.Warm(s.Argv, s.Env, p.cfg.BaseEnv)
	if !ok {
		t.Fatal("the spec has no warm form")
	}
	ws := warmSpec(s, warmArgv, p.cfg)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				p.kind(ws, false)
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(quit); <-done }) }
	t.Cleanup(stop)
	return stop
}

// noForking is a jail manager on a host where fork servers cannot run.
type noForking struct{ *sandbox.Manager }

func (noForking) StartTemplate(context.Context, sandbox.Spec, sandbox.OutputFunc) (*sandbox.Template, error) {
	return nil, fmt.Errorf("%w: no fork server here", sandbox.ErrUnsupported)
}

// TestNoForkServerFallsBackToWarmJails: where a fork server cannot run, a
// kind keeps being served warm, by jails.
func TestNoForkServerFallsBackToWarmJails(t *testing.T) {
	p := newPool(t, Config{ForkServer: true})
	p.jails = noForking{p.jails.(*sandbox.Manager)}
	s := spec("print('warm')\n")
	warmUp(t, p, s)
	hits := p.Stats().Hits
	if res := run(t, p, s); res.Status != sandbox.StatusOK || string(res.Stdout) != "warm\n" {
		t.Fatalf("status %s stdout %q", res.Status, res.Stdout)
	}
	if st := p.Stats(); st.Hits != hits+1 || st.ForkedRuns != 0 || st.Templates != 0 {
		t.Fatalf("not served by a warm jail: %+v", st)
	}
}

// forkServers lists the fork servers of this test binary: uid 0, the
// fork server's command line, a jail's init as parent, in this binary's
// cgroup parent.
func forkServers() []int {
	var pids []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		cmd, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		status, err2 := os.ReadFile("/proc/" + d.Name() + "/status")
		if err != nil || err2 != nil || !strings.Contains(string(cmd), "# pyexec fork server.") || !strings.Contains(string(status), "Uid:\t0\t") {
			continue
		}
		ppid := ""
		for _, l := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(l, "PPid:\t"); ok {
				ppid = v
			}
		}
		parent, _ := os.ReadFile("/proc/" + ppid + "/cmdline")
		cg, _ := os.ReadFile("/proc/" + d.Name() + "/cgroup")
		if !strings.HasPrefix(string(parent), "pyexec\x00sandbox-init") || !strings.Contains(string(cg), fmt.Sprintf("/pyexec-pooltest-%d/", os.Getpid())) {
			continue
		}
		if pid, err := strconv.Atoi(d.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestDeadForkServerIsReplaced: a fork server that dies is replaced, and
// its kind goes on being served by forked executions.
func TestDeadForkServerIsReplaced(t *testing.T) {
	p := newPool(t, Config{ForkServer: true})
	before := forkServers() // other tests' servers, maybe still ending
	s := spec("print('forked')\n")
	warmUp(t, p, s)
	killed := 0
	for _, pid := range forkServers() {
		if !slices.Contains(before, pid) && syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed++
		}
	}
	if killed != 1 {
		t.Fatalf("killed %d fork servers, want 1", killed)
	}
	time.Sleep(200 * time.Millisecond) // its jail ends, and its executions with it
	// Served by a forked execution of the new server.
	runUntilForked(t, p, s, "forked\n", func() bool { return true })
}

// runUntilForked runs s, each run completing with stdout want, until one
// is served by a forked execution while done holds; it fails the test
// after a minute.
func runUntilForked(t *testing.T, p *Pool, s sandbox.Spec, want string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		forked := p.Stats().ForkedRuns
		if res := run(t, p, s); res.Status != sandbox.StatusOK || string(res.Stdout) != want {
			t.Fatalf("status %s stdout %q stderr %s", res.Status, res.Stdout, res.Stderr)
		}
		if p.Stats().ForkedRuns > forked && done() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no forked execution as wanted: %+v", p.Stats())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLiveOutputOfAWarmExecution: what a warm execution prints first,
// right after its request, reaches the caller live.
func TestLiveOutputOfAWarmExecution(t *testing.T) {
	forEachMode(t, func(t *testing.T, fork bool) {
		p := newPool(t, Config{ForkServer: fork})
		s := spec("import time\nprint('first', flush=True)\ntime.sleep(1)\n")
		warmUp(t, p, s)
		live := make(chan string, 16)
		start := time.Now()
		res, err := p.Run(context.Background(), s, func(st sandbox.Stream, b []byte) {
			if st == sandbox.Stdout {
				live <- string(b)
			}
		})
		if err != nil || res.Status != sandbox.StatusOK {
			t.Fatalf("%v %s", err, res.Status)
		}
		select {
		case got := <-live:
			if !strings.Contains(got, "first") {
				t.Fatalf("live output %q", got)
			}
		default:
			t.Fatalf("the first line never arrived live (run took %s)", time.Since(start))
		}
	})
}

// TestFailingForkServerIsReplaced: a fork server whose forks keep failing
// (here: its pids cgroup admits no new task) is replaced by a new one.
func TestFailingForkServerIsReplaced(t *testing.T) {
	p := newPool(t, Config{ForkServer: true})
	before := forkServers()
	s := spec("print('forked')\n")
	warmUp(t, p, s)
	var mine []int
	for _, pid := range forkServers() {
		if !slices.Contains(before, pid) {
			mine = append(mine, pid)
		}
	}
	if len(mine) != 1 {
		t.Fatalf("%d fork servers for one kind", len(mine))
	}
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", mine[0]))
	if err != nil {
		t.Fatal(err)
	}
	var pidsDir string
	for _, line := range strings.Split(string(cg), "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), "pids") {
			pidsDir = "/sys/fs/cgroup/pids" + parts[2]
		} else if len(parts) == 3 && parts[0] == "0" && pidsDir == "" {
			pidsDir = "/sys/fs/cgroup" + parts[2] // cgroup v2
		}
	}
	// No fork at all: a limit at pids.current would let the server go on
	// forking if a child that was exiting counted when it was read.
	if err := os.WriteFile(pidsDir+"/pids.max", []byte("0"), 0); err != nil {
		t.Fatal(err)
	}
	// Forked again, by a new server, the failing one gone.
	runUntilForked(t, p, s, "forked\n", func() bool {
		now := forkServers()
		fresh := slices.ContainsFunc(now, func(pid int) bool { return pid != mine[0] && !slices.Contains(before, pid) })
		return fresh && !slices.Contains(now, mine[0])
	})
}

// TestWarningsAreShown: a warning the user's code raises is printed, as
// in a plain run (the fork server's own filters do not reach executions).
func TestWarningsAreShown(t *testing.T) {
	forEachMode(t, func(t *testing.T, fork bool) {
		p := newPool(t, Config{ForkServer: fork})
		s := spec("import warnings\nwarnings.warn('careful')\n")
		warmUp(t, p, s)
		res := run(t, p, s)
		if res.Status != sandbox.StatusOK || !strings.Contains(string(res.Stderr), "UserWarning: careful") {
			t.Fatalf("status %s stderr %q", res.Status, res.Stderr)
		}
	})
}

// TestUnclosedFilesAreWritten: a file the user's code leaves open is
// complete once the execution ended, as after a plain interpreter's exit.
func TestUnclosedFilesAreWritten(t *testing.T) {
	forEachMode(t, func(t *testing.T, fork bool) {
		p := newPool(t, Config{ForkServer: fork})
		// A file object of a class of the user's is flushed too.
		s := spec("f = open('out.txt', 'w')\nf.write('data ' * 1000)\nlog = open('log.txt', 'a'); print('line', file=log)\n" +
			"import io\nclass Notes(io.TextIOWrapper):\n    pass\nn = Notes(open('notes.txt', 'wb'))\nn.write('noted')\n")
		s.Collect = &sandbox.Collect{}
		warmUp(t, p, s)
		res := run(t, p, s)
		got := map[string]string{}
		for _, f := range res.Files {
			got[f.Path] = string(f.Data)
		}
		if res.Status != sandbox.StatusOK || got["out.txt"] != strings.Repeat("data ", 1000) || got["log.txt"] != "line\n" ||
			got["notes.txt"] != "noted" {
			t.Fatalf("status %s, files %q", res.Status, got)
		}
	})
}

// TestForkServersAreBounded: beyond MaxForkServers, a kind is served by
// warm jails.
func TestForkServersAreBounded(t *testing.T) {
	p := newPool(t, Config{ForkServer: true, MaxForkServers: 1})
	a := spec("print('a')\n")
	// Another kind whose fork server is another: its interpreter is
	// named by another path.
	real, err := filepath.EvalSymlinks(python)
	if err != nil || real == python {
		t.Skipf("needs %s to be a symlink (%v)", python, err)
	}
	b := spec("print('b')\n")
	b.Argv = runner.Argv(real, runner.Options{Entrypoint: "main.py", EvalLastExpr: true})
	warmUp(t, p, a)
	if _, err := p.Run(context.Background(), b, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for p.Stats().Warm < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	forked := p.Stats().ForkedRuns
	if res := run(t, p, b); res.Status != sandbox.StatusOK || string(res.Stdout) != "b\n" {
		t.Fatalf("status %s stdout %q", res.Status, res.Stdout)
	}
	if st := p.Stats(); st.ForkedRuns != forked || st.Templates != 1 {
		t.Fatalf("a second kind got a fork server beyond the bound: %+v", st)
	}
}

// TestKindsShareAForkServer: kinds that differ only in what their
// executions do (here: collecting files) fork from one fork server.
func TestKindsShareAForkServer(t *testing.T) {
	p := newPool(t, Config{ForkServer: true})
	a := spec("print('a')\n")
	b := spec("print('b')\n")
	b.Collect = &sandbox.Collect{}
	warmUp(t, p, a)
	runUntilForked(t, p, b, "b\n", func() bool { return true })
	if st := p.Stats(); st.Kinds != 2 || st.Templates != 1 {
		t.Fatalf("two kinds of one interpreter: %+v", st)
	}
}

// TestTheDriverKeepsItsChannel: cold, warm and forked, user code can
// neither remove the relay the driver fetches its channel from nor take the
// channel away by closing descriptors: its outputs and report still arrive.
func TestTheDriverKeepsItsChannel(t *testing.T) {
	forEachMode(t, func(t *testing.T, fork bool) {
		p := newPool(t, Config{ForkServer: fork})
		s := spec(`import errno, os
for f in (lambda: os.unlink("/dev/shm/.pyexec-relay"), lambda: os.rename("/dev/shm/.pyexec-relay", "/dev/shm/x")):
    try:
        f()
        print("removed")
    except OSError as e:
        print("kept", errno.errorcode[e.errno])
print("PYEXEC_RELAY" in os.environ)
os.closerange(3, 1 << 16)
display({"text/plain": "shown"}, raw=True)
6 * 7
`)
		for _, name := range []string{"first", "warm"} {
			if name == "warm" {
				warmUp(t, p, s)
			}
			res := run(t, p, s)
			if res.Status != sandbox.StatusOK || string(res.Stdout) != "kept EPERM\nkept EPERM\nFalse\n" {
				t.Fatalf("%s: status %s stdout %q stderr %s", name, res.Status, res.Stdout, res.Stderr)
			}
			rep, err := runner.ParseReport(res.Channel)
			if err != nil || rep.Result == nil || *rep.Result != "42" || len(rep.Outputs) != 2 ||
				string(rep.Outputs[0].Data["text/plain"]) != `"shown"` {
				t.Fatalf("%s: report %+v err %v", name, rep, err)
			}
		}
	})
}

// TestUserCodeSeesOnlyItsOwnJail: cold, warm and forked, the user's first
// line finds only stdio open (the driver fetches its result channel from
// the jail's PID 1 for each write), and its own cgroup as the root of its
// cgroup namespace.
func TestUserCodeSeesOnlyItsOwnJail(t *testing.T) {
	forEachMode(t, func(t *testing.T, fork bool) {
		p := newPool(t, Config{ForkServer: fork})
		s := spec(runnertest.OwnViewProbe)
		misses := p.Stats().Misses
		first := run(t, p, s) // cold, unless a fork server serves it at once
		if !fork && p.Stats().Misses != misses+1 {
			t.Fatalf("the first execution of a kind was not cold: %+v", p.Stats())
		}
		deadline := time.Now().Add(20 * time.Second)
		for p.Stats().Warm == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		hits, forked := p.Stats().Hits, p.Stats().ForkedRuns
		warm := run(t, p, s)
		if p.Stats().Hits != hits+1 {
			t.Fatalf("not served warm: %+v", p.Stats())
		}
		served(t, p, fork, forked)
		for name, res := range map[string]sandbox.Result{"first": first, "warm": warm} {
			if res.Status != sandbox.StatusOK || res.ExitCode != 0 {
				t.Fatalf("%s: status %s exit %d stderr %s", name, res.Status, res.ExitCode, res.Stderr)
			}
			runnertest.CheckOwnView(t, string(res.Stdout))
		}
	})
}
