package sandbox

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestNothingCarriesOverBetweenRuns: a file or a process left by one run
// is invisible to the next.
func TestNothingCarriesOverBetweenRuns(t *testing.T) {
	m := needJail(t)
	first := runPy(t, m, `import os, subprocess
for d in ("/work", "/tmp", "/dev/shm"):
    open(d + "/left-behind", "w").write("secret")
if os.fork() == 0:
    os.setsid()
    import time
    while True: time.sleep(1)
print("planted")`)
	printed("planted")(t, first)
	second := runPy(t, m, `import os
print([d for d in ("/work", "/tmp", "/dev/shm") if os.path.exists(d + "/left-behind")])
print("PIDS", len([p for p in os.listdir("/proc") if p.isdigit()]))`)
	printed("[]\nPIDS 2\n")(t, second)
}

// TestConcurrentRunsAreIsolated: two jails running at once see neither
// each other's files nor processes, nor (through /proc/*/fd and fdinfo)
// each other's open files.
func TestConcurrentRunsAreIsolated(t *testing.T) {
	m := needJail(t)
	code := `import glob, os, sys, time
f = open("/tmp/marker-" + sys.argv[1], "w"); f.write("x"); f.flush()
time.sleep(0.5)
held = set()
for fd in glob.glob("/proc/[0-9]*/fd/*"):
    try: target = os.readlink(fd)
    except OSError: continue
    if "marker-" in target and os.path.exists(fd.replace("/fd/", "/fdinfo/")): held.add(target)
print(sorted(os.listdir("/tmp")), len([p for p in os.listdir("/proc") if p.isdigit()]), sorted(held))`
	var wg sync.WaitGroup
	results := make([]Result, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := m.Run(context.Background(), Spec{
				Argv: []string{python, "-c", code, string(rune('a' + i))},
				Env:  []string{"PATH=/usr/bin"},
			}, nil)
			if err != nil {
				t.Error(err)
			}
			results[i] = res
		}()
	}
	wg.Wait()
	for i, r := range results {
		name := "marker-" + string(rune('a'+i))
		want := "['" + name + "'] 2 ['/tmp/" + name + "']\n"
		if r.Status != StatusOK || string(r.Stdout) != want {
			t.Errorf("run %d: status %s stdout %q, want %q (stderr %s)", i, r.Status, r.Stdout, want, r.Stderr)
		}
	}
}

// TestCancelKillsTheRun: cancelling the context ends the run as killed,
// keeps partial output, and leaves no process.
func TestCancelKillsTheRun(t *testing.T) {
	m := needJail(t)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	var once sync.Once
	done := make(chan Result, 1)
	go func() {
		res, _ := m.Run(ctx, Spec{
			Argv: []string{python, "-c", "import os\nprint('working', flush=True)\nif os.fork() == 0: os.setsid()\nwhile True: pass"},
		}, func(s Stream, p []byte) { once.Do(func() { close(started) }) })
		done <- res
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("no output within 10s")
	}
	cancel()
	r := <-done
	if r.Status != StatusKilled || string(r.Stdout) != "working\n" {
		t.Fatalf("status %s stdout %q, want killed with partial output", r.Status, r.Stdout)
	}
	if left := jailProcesses(); len(left) > 0 {
		t.Fatalf("processes survived the kill: %v", left)
	}
}

// TestLiveOutputStdinAndChannel: output arrives live and in order, stdin
// is fed, and the result channel, fetched from the jail's relay, carries
// what the payload writes; only stdio is inherited.
func TestLiveOutputStdinAndChannel(t *testing.T) {
	m := needJail(t)
	var mu sync.Mutex
	var live bytes.Buffer
	res, err := m.Run(context.Background(), Spec{
		Argv:          []string{python, "-c", "import os\nFD3 = os.path.exists('/proc/self/fd/3')\n" + fetchChannel + "import sys\nfor i in range(3): print('line', i, flush=True)\nprint(sys.stdin.read().upper())\nos.write(CH, b'{\"ok\": true}')\nprint(TAGS, FD3, 'PYEXEC_RELAY' in os.environ)"},
		Stdin:         []byte("hello stdin"),
		ResultChannel: true,
	}, func(s Stream, p []byte) {
		mu.Lock()
		defer mu.Unlock()
		if s == Stdout {
			live.Write(p)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "line 0\nline 1\nline 2\nHELLO STDIN\nb'c' False True\n"
	if res.Status != StatusOK || string(res.Stdout) != want {
		t.Fatalf("status %s stdout %q stderr %s", res.Status, res.Stdout, res.Stderr)
	}
	if live.String() != want {
		t.Errorf("live output %q, want %q", live.String(), want)
	}
	if string(res.Channel) != `{"ok": true}` {
		t.Errorf("channel %q", res.Channel)
	}
	if res.PeakMemory <= 0 || res.CPUTime <= 0 {
		t.Errorf("peak memory %d, cpu %s: usage not reported", res.PeakMemory, res.CPUTime)
	}
}

// TestNoRelayWithoutPipes: a payload that asks for neither a result
// channel nor a request pipe gets no relay either.
func TestNoRelayWithoutPipes(t *testing.T) {
	m := needJail(t)
	res, err := m.Run(t.Context(), Spec{Argv: []string{python, "-c",
		"import os; print(os.environ.get('PYEXEC_RELAY'), os.path.lexists('/dev/shm/.pyexec-relay'))"}}, nil)
	if err != nil || res.Status != StatusOK || string(res.Stdout) != "None False\n" {
		t.Fatalf("err %v status %s stdout %q stderr %s", err, res.Status, res.Stdout, res.Stderr)
	}
}

// TestExitCodesAndSignals: the exit status and the terminating signal are
// reported as a shell would.
func TestExitCodesAndSignals(t *testing.T) {
	m := needJail(t)
	cases := []struct {
		name   string
		code   string
		status Status
		exit   int
	}{
		{"exit 0", "pass", StatusOK, 0},
		{"exit 3", "raise SystemExit(3)", StatusError, 3},
		{"exception", "1/0", StatusError, 1},
		{"killed by SIGKILL", "import os; os.kill(os.getpid(), 9)", StatusError, 137},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runPy(t, m, c.code)
			if r.Status != c.status || r.ExitCode != c.exit {
				t.Fatalf("status %s exit %d, want %s %d", r.Status, r.ExitCode, c.status, c.exit)
			}
		})
	}
}

// TestPreparedJailTightensLimitsAtHandOff: a jail prepared ahead of time
// enforces the limits given with its payload, and serves one payload only.
func TestPreparedJailTightensLimitsAtHandOff(t *testing.T) {
	m := needJail(t)
	j, err := m.Prepare(context.Background(), Base{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	spec := Spec{
		Argv:   []string{python, "-c", "x = bytearray(200 << 20); print('allocated')"},
		Limits: Limits{MemoryBytes: 64 << 20},
	}
	r, err := j.Run(context.Background(), spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusOOM || strings.Contains(string(r.Stdout), "allocated") {
		t.Fatalf("status %s stdout %q: a 64 MiB jail allocated 200 MiB", r.Status, r.Stdout)
	}
	if _, err := j.Run(context.Background(), spec, nil); !errors.Is(err, ErrJailUsed) {
		t.Fatalf("second Run: %v, want ErrJailUsed", err)
	}
}

// TestSetupFailsClosed: a layer that cannot be applied fails the run with
// setup_error and a reason; the payload never runs.
func TestSetupFailsClosed(t *testing.T) {
	m := needJail(t)
	r, err := m.Run(context.Background(), Spec{
		Argv:   []string{python, "-c", "print('ran')"},
		Mounts: []Mount{{Source: "/nonexistent/python/prefix"}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusSetupError || !strings.Contains(r.Reason, "/nonexistent/python/prefix") || len(r.Stdout) > 0 {
		t.Fatalf("status %s reason %q stdout %q", r.Status, r.Reason, r.Stdout)
	}
	r, err = m.Run(context.Background(), Spec{Argv: []string{"/no/such/binary"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusSetupError || !strings.Contains(r.Reason, "exec") {
		t.Fatalf("missing binary: status %s reason %q", r.Status, r.Reason)
	}
}

// TestExtraMountIsReadOnly: a dependency environment mounted into the jail
// is visible and cannot be written.
func TestExtraMountIsReadOnly(t *testing.T) {
	m := needJail(t)
	// Not below /tmp: the jail's own /tmp is mounted over it.
	dir, err := os.MkdirTemp("/var/tmp", "pyexec-mount-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeTestModule(dir); err != nil {
		t.Fatal(err)
	}
	r := runPy(t, m, `import sys; sys.path.insert(0, `+quote(dir)+`)
import depmod; print(depmod.VALUE)
try:
    open(`+quote(dir+"/depmod.py")+`, "a").write("x"); print("WROTE")
except OSError: print("READONLY")`, func(s *Spec) { s.Mounts = []Mount{{Source: dir}} })
	printed("42\nREADONLY")(t, r)
}

// TestSweepRemovesOnlyItsInstance: a restarted server removes the jails
// its predecessor left — processes and cgroups — and never touches the
// jails of another server sharing the cgroup parent.
func TestSweepRemovesOnlyItsInstance(t *testing.T) {
	needJail(t)
	newM := func(instance string) *Manager {
		t.Helper()
		x, err := New(Config{CgroupParent: testParent, Instance: instance})
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	mine, other := newM("sweepa"), newM("sweepb")
	left, err := mine.Prepare(context.Background(), Base{})
	if err != nil {
		t.Fatal(err)
	}
	defer left.Close()
	alive, err := other.Prepare(context.Background(), Base{})
	if err != nil {
		t.Fatal(err)
	}
	defer alive.Close()

	n, err := newM("sweepa").Sweep()
	if err != nil || n != 1 {
		t.Fatalf("sweep removed %d jails (err %v), want exactly the predecessor's one", n, err)
	}
	select {
	case <-left.initDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the swept jail's init is still running")
	}
	r, err := alive.Run(context.Background(), Spec{Argv: []string{python, "-c", "print('still here')"}}, nil)
	if err != nil || r.Status != StatusOK || string(r.Stdout) != "still here\n" {
		t.Fatalf("the other server's jail was disturbed: %v %s %s %q", err, r.Status, r.Reason, r.Stdout)
	}
	if err := left.Close(); err != nil {
		t.Fatalf("closing a swept jail: %v", err)
	}
}

// TestMemoryLimitAboveTheDefault: a run may ask for more memory than the
// jail was created with (the v1 swap limit must be raised first).
func TestMemoryLimitAboveTheDefault(t *testing.T) {
	m := needJail(t)
	r := runPy(t, m, "x = bytearray(600 << 20)\nprint('allocated', len(x) >> 20)", withLimits(Limits{MemoryBytes: 1 << 30}))
	printed("allocated 600")(t, r)
}

// TestOrdinaryWritesWork: what ordinary programs write outside /work —
// /dev/null opened with "w", their own /proc entries — is allowed.
func TestOrdinaryWritesWork(t *testing.T) {
	m := needJail(t)
	r := runPy(t, m, `open("/dev/null", "w").write("x")
open("/proc/self/comm", "w").write("renamed")
print(open("/proc/self/comm").read().strip())`)
	printed("renamed")(t, r)
}
