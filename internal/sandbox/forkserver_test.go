package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/runner"
	"golang.org/x/sys/unix"
)

// TestForkedExecutionsShareNothing runs executions forked from one fork
// server one after the other and side by side: a global, a file in any
// writable place, a process, a listening socket or the random state of one
// is never visible to another.
func TestForkedExecutionsShareNothing(t *testing.T) {
	m := needJail(t)
	tpl := startTemplate(t, m, "random")
	run := forked(tpl)
	first := run(t, m, `import builtins, os, random, subprocess
builtins.LEAKED = "global"
for d in ("/work", "/tmp", "/dev/shm"):
    open(d + "/leak", "w").write("x")
subprocess.Popen(["sleep", "60"], start_new_session=True)
print("RAND", random.getrandbits(64))`)
	second := run(t, m, `import builtins, os, random
print("GLOBAL", hasattr(builtins, "LEAKED"))
print("FILES", [d for d in ("/work", "/tmp", "/dev/shm") if os.path.exists(d + "/leak")])
print("PROCS", sorted(open("/proc/%s/cmdline" % p).read().split("\0")[0] for p in os.listdir("/proc") if p.isdigit()))
print("RAND", random.getrandbits(64))`)
	for _, r := range []Result{first, second} {
		if r.Status != StatusOK {
			t.Fatalf("status %s (%s): %s", r.Status, r.Reason, r.Stderr)
		}
	}
	out := string(second.Stdout)
	for _, want := range []string{"GLOBAL False", "FILES []"} {
		if !strings.Contains(out, want) {
			t.Errorf("second execution: want %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "sleep") {
		t.Errorf("the first execution's process is visible to the second:\n%s", out)
	}
	rand := func(r Result) string {
		_, v, _ := strings.Cut(string(r.Stdout), "RAND ")
		return strings.TrimSpace(v)
	}
	if rand(first) == "" || rand(first) == rand(second) {
		t.Errorf("both executions drew the same random number %q", rand(first))
	}

	// Side by side: one listens on the loopback, the other cannot reach it.
	var wg sync.WaitGroup
	var server, client Result
	wg.Add(2)
	go func() {
		defer wg.Done()
		server = run(t, m, `import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 7777)); s.listen()
print("LISTENING", flush=True); time.sleep(3)`)
	}()
	go func() {
		defer wg.Done()
		time.Sleep(time.Second)
		client = run(t, m, `import socket
try:
    socket.create_connection(("127.0.0.1", 7777), timeout=1); print("CONNECTED")
except OSError as e:
    print("REFUSED", e)`)
	}()
	wg.Wait()
	if !strings.Contains(string(server.Stdout), "LISTENING") || !strings.Contains(string(client.Stdout), "REFUSED") {
		t.Errorf("loopback shared between executions: server %q client %q %s", server.Stdout, client.Stdout, client.Stderr)
	}
}

// TestForkedExecutionGetsItsLimits hands a forked execution 64 MiB: it
// cannot allocate 200 MiB, and a wall time limit ends it.
func TestForkedExecutionGetsItsLimits(t *testing.T) {
	m := needJail(t)
	run := forked(startTemplate(t, m))
	r := run(t, m, `b = bytearray(200 << 20)
for i in range(0, len(b), 4096): b[i] = 1
print("ALLOCATED")`, withLimits(Limits{MemoryBytes: 64 << 20}))
	if r.Status != StatusOOM || strings.Contains(string(r.Stdout), "ALLOCATED") {
		t.Fatalf("200 MiB in a 64 MiB execution: status %s (%s), stdout %q", r.Status, r.Reason, r.Stdout)
	}
	r = run(t, m, `import time; time.sleep(30)`, withLimits(Limits{WallTime: 500 * time.Millisecond}))
	if r.Status != StatusTimeout || r.WallTime > 5*time.Second {
		t.Fatalf("sleep past the wall time: status %s after %s", r.Status, r.WallTime)
	}
}

// TestForkServerDeathIsReported kills a fork server: it reports Done and
// a fork fails with a reason instead of hanging.
func TestForkServerDeathIsReported(t *testing.T) {
	m := needJail(t)
	tpl := startTemplate(t, m)
	tpl.proc.Kill()
	select {
	case <-tpl.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the fork server did not end")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := tpl.Fork(ctx, Spec{Argv: []string{python}, Requests: true}, nil); err == nil {
		t.Fatal("fork from a dead server succeeded")
	}
}

// TestForkFailuresEndCleanly: an execution that cannot be built, or whose
// caller gives up while it is built, ends with an error instead of hanging,
// and the fork server serves the next one.
func TestForkFailuresEndCleanly(t *testing.T) {
	m := needJail(t)
	tpl := startTemplate(t, m)
	spec := Spec{Argv: []string{python}, Env: testEnv, Requests: true, Dir: "/nonexistent"}
	done := make(chan error, 2)
	go func() {
		j, _, err := tpl.Fork(context.Background(), spec, nil)
		if err == nil {
			j.Close()
			err = errors.New("a fork into a missing working directory succeeded")
		}
		done <- err
	}()
	go func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		spec := spec
		spec.Dir = ""
		j, _, err := tpl.Fork(ctx, spec, nil)
		if err == nil {
			j.Close()
		}
		done <- nil
	}()
	for range 2 {
		select {
		case err := <-done:
			if err != nil && !strings.Contains(err.Error(), "nonexistent") {
				t.Errorf("a bad working directory failed with %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("a failed fork hangs")
		}
	}
	if r := forked(tpl)(t, m, `print("next")`); !strings.Contains(string(r.Stdout), "next") {
		t.Fatalf("the fork server does not serve after failures: %s %s", r.Status, r.Stderr)
	}
}

// TestForkFailureSparesRunningExecutions: when the fork server cannot
// fork (its cgroup is out of tasks), that fork fails, the execution
// already running completes, and the server forks again afterwards.
func TestForkFailureSparesRunningExecutions(t *testing.T) {
	m := needJail(t)
	tpl := startTemplate(t, m)
	run := forked(tpl)
	running := make(chan Result, 1)
	go func() { running <- run(t, m, `import time; time.sleep(2); print("survived")`) }()
	time.Sleep(500 * time.Millisecond)

	pidsMax := pidsMaxFile(t, tpl.jail.initPid())
	old, err := os.ReadFile(pidsMax)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := os.ReadFile(filepath.Join(filepath.Dir(pidsMax), "pids.current"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pidsMax, bytes.TrimSpace(cur), 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if j, _, err := tpl.Fork(ctx, Spec{Argv: []string{python}, Env: testEnv, Requests: true}, nil); err == nil {
		j.Close()
		t.Error("a fork beyond the fork server's tasks limit succeeded")
	}
	if err := os.WriteFile(pidsMax, bytes.TrimSpace(old), 0); err != nil {
		t.Fatal(err)
	}
	if r := <-running; r.Status != StatusOK || !strings.Contains(string(r.Stdout), "survived") {
		t.Fatalf("the running execution did not survive a failed fork: %s (%s)", r.Status, r.Reason)
	}
	if r := run(t, m, `print("again")`); !strings.Contains(string(r.Stdout), "again") {
		t.Fatalf("no fork after the failure: %s %s", r.Status, r.Stderr)
	}
}

// pidsMaxFile is the pids.max of the cgroup of pid (v1 or v2).
func pidsMaxFile(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "pids" {
				return filepath.Join("/sys/fs/cgroup/pids", parts[2], "pids.max")
			}
		}
		if parts[0] == "0" && parts[1] == "" {
			if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
				return filepath.Join("/sys/fs/cgroup", parts[2], "pids.max")
			}
		}
	}
	t.Fatalf("no pids cgroup for pid %d", pid)
	return ""
}

// TestServerDescriptorsDoNotLeak: a descriptor the server inherited from
// whoever started it (not close-on-exec, any number) is not open in a
// payload, cold, warm or forked.
func TestServerDescriptorsDoNotLeak(t *testing.T) {
	m := needJail(t)
	tpl := startTemplate(t, m) // started after the descriptor exists below
	f, err := os.Open("/etc/hostname")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const leaked = 300
	if err := unix.Dup2(int(f.Fd()), leaked); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(leaked)
	tpl2 := startTemplate(t, m)
	code := fmt.Sprintf(`import os
try:
    os.fstat(%d); print("LEAKED")
except OSError:
    print("CLOSED")`, leaked)
	for name, run := range map[string]func(testing.TB, *Manager, string, ...pyOpt) Result{
		"cold": runPy, "warm": runWarm, "forked": forked(tpl), "forked from a server started with it": forked(tpl2),
	} {
		if r := run(t, m, code); !strings.Contains(string(r.Stdout), "CLOSED") {
			t.Errorf("%s: the server's descriptor %d is open in the payload: %s %s", name, leaked, r.Stdout, r.Stderr)
		}
	}
}

// TestBrokenForkServerSaysWhy: a fork server that cannot start is an
// error that carries what it printed.
func TestBrokenForkServerSaysWhy(t *testing.T) {
	m := needJail(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := m.StartTemplate(ctx, Spec{Argv: runner.ForkServerArgv(python, nil), Stdin: runner.ForkServerStdin("raise SystemExit('no driver here')"), Env: testEnv}, nil)
	if err == nil || !strings.Contains(err.Error(), "no driver here") {
		t.Fatalf("StartTemplate with a broken driver: %v", err)
	}
}

// TestReaperServesAndReapsWhileThePayloadRuns: a forked execution's
// reaper reaps an orphan that ends while the payload still runs (it is no
// zombie the payload can see), and neither relay clients that never read
// (the payload's own, and a double-forked sleeper's) nor the sleeper
// itself delay the exit report: the run ends at once, and nothing of it is
// left.
func TestReaperServesAndReapsWhileThePayloadRuns(t *testing.T) {
	m := needJail(t)
	run := forked(startTemplate(t, m))
	before := jailProcesses()
	r := run(t, m, `import os, socket, time
RELAY = "/dev/shm/.pyexec-relay"
def connect():
    s = socket.socket(socket.AF_UNIX)
    s.connect(RELAY)
    return s  # never read from
held = [connect() for _ in range(50)]
def orphan(then):
    r, w = os.pipe()
    if os.fork() == 0:
        os.close(r)
        pid = os.fork()
        if pid == 0:
            os.close(w)
            then()
            os._exit(0)
        os.write(w, b"%d" % pid)
        os._exit(0)
    os.close(w)
    os.wait()
    pid = int(os.read(r, 16))
    os.close(r)
    return pid
def sleep_holding_the_relay():
    os.setsid()
    os.close(1); os.close(2)
    s = connect()
    time.sleep(600)
quick = orphan(lambda: None)
orphan(sleep_holding_the_relay)
deadline = time.monotonic() + 10
while os.path.exists("/proc/%d" % quick) and time.monotonic() < deadline:
    time.sleep(0.01)
if os.path.exists("/proc/%d" % quick):
    print("orphan left:", open("/proc/%d/stat" % quick).read())
else:
    print("orphan reaped")`, withLimits(Limits{WallTime: time.Minute}))
	if r.Status != StatusOK || string(r.Stdout) != "orphan reaped\n" {
		t.Fatalf("status %s (%s), stdout %q, stderr %s", r.Status, r.Reason, r.Stdout, r.Stderr)
	}
	// A client or a sleeper that held the reaper up would end the run at
	// its one-minute wall time instead.
	if r.WallTime > 15*time.Second {
		t.Errorf("the run took %s", r.WallTime)
	}
	if left := processesLeft(before); len(left) > 0 {
		t.Errorf("processes outlived the run: %v", left)
	}
}

// TestReaperReportsThroughARelayFlood: orphans that connect to the relay
// as fast as they can, forever, do not keep the reaper from seeing the
// payload's exit: the run ends with the payload's exit code at once, not
// at its wall time, and the flooders are gone with it.
func TestReaperReportsThroughARelayFlood(t *testing.T) {
	m := needJail(t)
	run := forked(startTemplate(t, m))
	before := jailProcesses()
	r := run(t, m, `import os, socket, sys, time
def flood():
    while True:
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect("/dev/shm/.pyexec-relay")
            s.close()
        except OSError:
            pass
for _ in range(40):
    if os.fork() == 0:
        if os.fork() == 0:
            os.close(1); os.close(2)
            flood()
        os._exit(0)
    os.wait()
time.sleep(1)
print("flooding")
sys.exit(3)`, withLimits(Limits{WallTime: 40 * time.Second, CPUTime: time.Minute, Pids: 64, CPUs: 2}))
	if r.Status != StatusError || r.ExitCode != 3 || string(r.Stdout) != "flooding\n" {
		t.Fatalf("status %s (%s), exit %d, stdout %q, stderr %s", r.Status, r.Reason, r.ExitCode, r.Stdout, r.Stderr)
	}
	if r.WallTime > 10*time.Second {
		t.Errorf("the run took %s", r.WallTime)
	}
	if left := processesLeft(before); len(left) > 0 {
		t.Errorf("processes outlived the run: %v", left)
	}
}

// TestForkedPayloadIsSignalledAfterItsOrphans: a forked execution's
// payload is looked up at its first signal, after its code made an orphan
// (in a session of its own) that the reaper adopted: SIGINT reaches the
// payload's group, not the orphan's, and the run goes on to its end.
func TestForkedPayloadIsSignalledAfterItsOrphans(t *testing.T) {
	m := needJail(t)
	tpl := startTemplate(t, m)
	var mu sync.Mutex
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spec := Spec{Env: testEnv, Limits: Limits{WallTime: 30 * time.Second}}
	j, p, err := tpl.Fork(ctx, Spec{Argv: []string{python}, Env: testEnv, Requests: true, Limits: ceilingsFor(spec)},
		func(s Stream, b []byte) {
			mu.Lock()
			out.Write(b)
			mu.Unlock()
		})
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	defer j.Close()
	code := `import os, signal, time
if os.fork() == 0:
    if os.fork() == 0:
        os.setsid()
        signal.signal(signal.SIGINT, lambda *a: print("orphan interrupted", flush=True))
        time.sleep(600)
    os._exit(0)
os.wait()
try:
    print("busy", flush=True)
    while True:
        pass
except KeyboardInterrupt:
    print("interrupted", flush=True)
`
	if err := p.HandOff(spec.Limits, nil, []byte(code)); err != nil {
		t.Fatalf("HandOff: %v", err)
	}
	p.CloseStdin()
	seen := func(want string) bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(out.String(), want)
	}
	for deadline := time.Now().Add(20 * time.Second); !seen("busy"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never busy; output %q", out.String())
		}
	}
	if err := p.Signal(unix.SIGINT); err != nil {
		t.Fatalf("Signal: %v", err)
	}
	r := p.Wait()
	mu.Lock()
	defer mu.Unlock()
	if r.Status != StatusOK || out.String() != "busy\ninterrupted\n" {
		t.Fatalf("status %s (%s), output %q, stderr %s", r.Status, r.Reason, out.String(), r.Stderr)
	}
}
