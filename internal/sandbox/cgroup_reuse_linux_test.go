package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupNames lists the names of the jail cgroups below this binary's
// parent, each once (a v1 jail has a directory in every hierarchy).
func cgroupNames() []string {
	var names []string
	for _, c := range jailCgroups() {
		if name := filepath.Base(c); !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// spare returns the name of the one cgroup m keeps for reuse, after every
// release ended: the one jail cgroup that is not in before (those made
// before the executions, a fork server's say); the test fails when there
// is none or more than one.
func spare(t *testing.T, m *Manager, before []string) string {
	t.Helper()
	m.Wait()
	kept := without(cgroupNames(), before)
	if len(kept) != 1 {
		t.Fatalf("%d spare cgroups after an execution (%v), want 1", len(kept), kept)
	}
	return kept[0]
}

// peakResetRefused reports whether m found that the kernel cannot reset
// memory.peak (cgroup v2 before Linux 6.12), which switches reuse off; it
// fails the test when a kernel that can did so.
func peakResetRefused(t *testing.T, m *Manager) bool {
	t.Helper()
	if m.cgroups.Reusing() {
		return false
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var major, minor int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor); err != nil {
		t.Fatalf("kernel release %q: %v", u.Release[:], err)
	}
	if major > 6 || major == 6 && minor >= 12 {
		t.Fatalf("reuse was switched off on Linux %d.%d, which resets memory.peak", major, minor)
	}
	return true
}

// noSpares checks that m keeps no cgroup (none but those in before is
// left), after every release ended.
func noSpares(t *testing.T, m *Manager, before []string) {
	t.Helper()
	m.Wait()
	if kept := without(cgroupNames(), before); len(kept) != 0 {
		t.Fatalf("%d spare cgroups kept on a kernel that cannot reset memory.peak", len(kept))
	}
}

// spareManager starts a manager of instance ("": the default) that keeps
// up to n cgroups for reuse, closed when the test ends.
func spareManager(t *testing.T, instance string, n int) *Manager {
	t.Helper()
	m, err := New(Config{CgroupParent: testParent, Instance: instance, SpareCgroups: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Manager.Close: %v", err)
		}
	})
	return m
}

// reusing runs first and then second in the same cgroup, cold and forked,
// and hands both Results to check. Where the kernel cannot reset
// memory.peak, second runs in a new cgroup (reuse is off) and check must
// pass all the same.
func reusing(t *testing.T, first, second string, firstOpts, secondOpts []pyOpt, check func(t *testing.T, a, b Result)) {
	m := spareManager(t, "", 1)
	modes := []struct {
		name string
		run  func(t testing.TB, m *Manager, code string, opts ...pyOpt) Result
	}{{"cold", runPy}, {"forked", forked(startTemplate(t, m))}}
	before := cgroupNames() // the fork server's
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			a := mode.run(t, m, first, firstOpts...)
			var cg string
			if !peakResetRefused(t, m) {
				cg = spare(t, m, before)
			}
			b := mode.run(t, m, second, secondOpts...)
			if peakResetRefused(t, m) {
				noSpares(t, m, before)
			} else if spare(t, m, before) != cg {
				t.Fatal("the second execution did not run in the first one's cgroup")
			}
			check(t, a, b)
		})
	}
}

// TestReusedCgroupMeasuresOnlyItsExecution: an execution in the cgroup of
// one that allocated 200 MiB and spun the CPU for a second reports its
// own peak memory and CPU time.
func TestReusedCgroupMeasuresOnlyItsExecution(t *testing.T) {
	needJail(t)
	hog := `import time
b = b"x" * (200 << 20)
t = time.process_time()
while time.process_time() - t < 1: pass
print(len(b))`
	big := []pyOpt{withLimits(Limits{MemoryBytes: 512 << 20, WallTime: 20 * time.Second})}
	reusing(t, hog, "print(1)", big, nil, func(t *testing.T, a, b Result) {
		if a.Status != StatusOK || a.PeakMemory < 200<<20 || a.CPUTime < 900*time.Millisecond {
			t.Fatalf("first: status %s, peak %d, cpu %s; want ok, ≥ 200 MiB, ≥ 0.9 s", a.Status, a.PeakMemory, a.CPUTime)
		}
		if b.Status != StatusOK || strings.TrimSpace(string(b.Stdout)) != "1" {
			t.Fatalf("second: status %s (%s), stdout %q", b.Status, b.Reason, b.Stdout)
		}
		if b.PeakMemory <= 0 || b.PeakMemory > 64<<20 {
			t.Errorf("second's peak memory is %d bytes: not its own (the first's was %d)", b.PeakMemory, a.PeakMemory)
		}
		// The first spun 1 s more than the second does: the second's
		// start-up alone may take a second under emulation (TCG).
		if b.CPUTime <= 0 || b.CPUTime > a.CPUTime-500*time.Millisecond {
			t.Errorf("second's CPU time is %s: not its own (the first's was %s)", b.CPUTime, a.CPUTime)
		}
	})
}

// TestReusedCgroupForgetsAnOOMKill: an execution that dies by a signal in
// the cgroup of one the kernel OOM-killed is not reported as OOM.
func TestReusedCgroupForgetsAnOOMKill(t *testing.T) {
	needJail(t)
	small := []pyOpt{withLimits(Limits{MemoryBytes: 64 << 20, WallTime: 20 * time.Second})}
	reusing(t, `b = b"x" * (200 << 20)`, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)", small, small,
		func(t *testing.T, a, b Result) {
			if a.Status != StatusOOM {
				t.Fatalf("first: status %s (%s), want %s", a.Status, a.Reason, StatusOOM)
			}
			if b.Status == StatusOOM || b.Signal != sigKill {
				t.Errorf("second: status %s (%s), signal %d; want killed by SIGKILL, not OOM", b.Status, b.Reason, b.Signal)
			}
		})
}

// TestReusedCgroupAfterPidsLimit: an execution that hit its task limit
// leaves none of its tasks to the next one in its cgroup, which starts its
// threads as in a new cgroup (20 of its 48 tasks; init's threads count too).
func TestReusedCgroupAfterPidsLimit(t *testing.T) {
	needJail(t)
	bomb := `import os, time
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
except OSError:
    print("limit", n)`
	threads := `import threading
ev = threading.Event()
ts = [threading.Thread(target=ev.wait) for _ in range(20)]
for t in ts: t.start()
ev.set()
for t in ts: t.join()
print("ok")`
	opts := []pyOpt{withLimits(Limits{Pids: 48, WallTime: 20 * time.Second})}
	reusing(t, bomb, threads, opts, opts, func(t *testing.T, a, b Result) {
		if !strings.HasPrefix(string(a.Stdout), "limit") {
			t.Fatalf("first: status %s (%s), stdout %q; want the fork bomb stopped by the limit", a.Status, a.Reason, a.Stdout)
		}
		if b.Status != StatusOK || strings.TrimSpace(string(b.Stdout)) != "ok" {
			t.Errorf("second: status %s (%s), stdout %q stderr %q; want 20 threads started", b.Status, b.Reason, b.Stdout, b.Stderr)
		}
	})
}

// instanceCgroups lists the cgroup directories of instance's jails below
// the test parent, in every hierarchy.
func instanceCgroups(instance string) []string {
	var out []string
	for _, c := range jailCgroups() {
		if strings.HasPrefix(filepath.Base(c), instance+"-") {
			out = append(out, c)
		}
	}
	return out
}

// keptSpare starts a manager of instance that keeps spares, for a test of
// their life, and runs print(1) in it until a cgroup is kept: it returns
// the manager and that cgroup's directories. It skips the test where no
// cgroup is kept: a cgroup v2 kernel before Linux 6.12, found at the
// manager's start (make test-vm's guest runs 6.1).
func keptSpare(t *testing.T, instance string) (*Manager, []string) {
	t.Helper()
	needJail(t)
	m := spareManager(t, instance, 2)
	if peakResetRefused(t, m) {
		t.Skip("this kernel cannot reset memory.peak: no cgroup is kept for reuse")
	}
	return m, runUntilKept(t, m, instance)
}

// runUntilKept runs print(1) in m until a cgroup of instance is kept for
// reuse, three times at most: vacating gives up on a cgroup whose dead
// jail's memory the kernel has not freed within 100 ms, which a loaded
// machine can make happen once.
func runUntilKept(t *testing.T, m *Manager, instance string) []string {
	t.Helper()
	for range 3 {
		runPy(t, m, "print(1)")
		m.Wait()
		if kept := instanceCgroups(instance); len(kept) > 0 {
			return kept
		}
	}
	t.Fatal("no cgroup kept for reuse after three executions")
	return nil
}

// TestSparesRemovedOnClose: the cgroups kept for reuse go when the
// manager closes.
func TestSparesRemovedOnClose(t *testing.T) {
	m, _ := keptSpare(t, "sparesclose")
	// A second one reuses it (before Linux 6.12 on cgroup v2: removes it).
	runPy(t, m, "print(2)")
	m.Wait()
	if err := m.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if left := instanceCgroups("sparesclose"); len(left) > 0 {
		t.Errorf("cgroups left after Close: %v", left)
	}
	runPy(t, m, "print(3)")
	m.Wait()
	if left := instanceCgroups("sparesclose"); len(left) > 0 {
		t.Errorf("a closed manager kept a cgroup: %v", left)
	}
}

// TestSparesSweptAfterCrash: the spares of a server that died without
// closing its manager are removed by the next server's sweep.
func TestSparesSweptAfterCrash(t *testing.T) {
	crashed, kept := keptSpare(t, "sparescrash")
	next, err := New(Config{CgroupParent: testParent, Instance: "sparescrash"})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := next.Sweep(); err != nil || n != 1 {
		t.Errorf("the sweep removed %d jails (err %v), want the one spare", n, err)
	}
	for _, dir := range kept {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s is still there after the sweep (%v)", dir, err)
		}
	}
	// The crashed manager's own state is stale now; closing it must not
	// trip over the swept directories.
	if err := crashed.Close(); err != nil {
		t.Errorf("closing over swept spares: %v", err)
	}
}

// TestSweepRemovesOwnSpares: a sweep by the server itself (at start after
// its test jail, at stop) removes its spares without counting them as a
// predecessor's, and later jails still get cgroups, kept again after.
func TestSweepRemovesOwnSpares(t *testing.T) {
	m, _ := keptSpare(t, "sparessweep")
	if n, err := m.Sweep(); err != nil || n != 0 {
		t.Errorf("the sweep counted %d jails of a previous run (err %v), want none", n, err)
	}
	if left := instanceCgroups("sparessweep"); len(left) > 0 {
		t.Errorf("spares left after the sweep: %v", left)
	}
	if r := runPy(t, m, "print(2)"); r.Status != StatusOK || r.PeakMemory <= 0 {
		t.Errorf("after the sweep: status %s (%s), peak %d", r.Status, r.Reason, r.PeakMemory)
	}
	m.Wait()
	if len(instanceCgroups("sparessweep")) == 0 {
		t.Error("no cgroup kept for reuse after the sweep")
	}
}
