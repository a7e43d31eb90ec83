package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cgroupLimits reads the memory, task and CPU limits the jail cgroup name
// holds from the kernel, by path (not through the descriptors the server
// keeps), in whichever hierarchies it has a directory.
func cgroupLimits(t *testing.T, name string) map[string]string {
	t.Helper()
	files := map[string]string{
		// cgroup v1: the memory, pids and cpu hierarchies.
		"memory.limit_in_bytes": "memory", "memory.memsw.limit_in_bytes": "memory+swap",
		"pids.max": "pids", "cpu.cfs_quota_us": "cpu",
		// cgroup v2: one directory (pids.max as on v1).
		"memory.max": "memory", "cpu.max": "cpu",
	}
	out := map[string]string{}
	for _, dir := range jailCgroups() {
		if filepath.Base(dir) != name {
			continue
		}
		for file, limit := range files {
			b, err := os.ReadFile(filepath.Join(dir, file))
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			out[limit] = strings.TrimSpace(string(b))
		}
	}
	return out
}

// wantLimits is what cgroupLimits reads in a jail's cgroup when it holds
// l; got is what it read (whether the host caps memory+swap).
func wantLimits(l Limits, got map[string]string) map[string]string {
	mem := strconv.FormatInt(l.MemoryBytes, 10)
	quota := strconv.FormatInt(int64(l.CPUs*100_000), 10) // of a 100 ms period
	out := map[string]string{"memory": mem, "pids": strconv.FormatInt(l.Pids, 10), "cpu": quota}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		out["cpu"] = quota + " 100000" // cgroup v2's cpu.max
	}
	if _, ok := got["memory+swap"]; ok {
		out["memory+swap"] = mem
	}
	return out
}

// heldOpen counts the descriptors of this process open on control files
// of the jail cgroup name.
func heldOpen(t *testing.T, name string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && filepath.Base(filepath.Dir(target)) == name && filepath.Base(filepath.Dir(filepath.Dir(target))) == testParent {
			n++
		}
	}
	return n
}

// TestReusedCgroupGetsTheNextLimits: executions with alternately large and
// small limits, one after the other in the same cgroup, each run under
// exactly its own memory, task and CPU limits, cold and forked: the
// cgroup holds them, 150 MiB fit in the large and are OOM-killed in the
// small, whatever the execution before it was given.
func TestReusedCgroupGetsTheNextLimits(t *testing.T) {
	needJail(t)
	m := spareManager(t, "", 1)
	large := Limits{MemoryBytes: 320 << 20, Pids: 96, CPUs: 1.5, WallTime: 20 * time.Second}
	small := Limits{MemoryBytes: 96 << 20, Pids: 40, CPUs: 0.5, WallTime: 20 * time.Second}
	const alloc = `b = bytearray(150 << 20)
for i in range(0, len(b), 4096): b[i] = 1
print("ALLOCATED")`
	modes := []struct {
		name string
		run  func(t testing.TB, m *Manager, code string, opts ...pyOpt) Result
	}{{"cold", runPy}, {"forked", forked(startTemplate(t, m))}}
	before := cgroupNames() // the fork server's
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			var prev string
			for i, l := range []Limits{large, small, large, small} {
				r := mode.run(t, m, alloc, withLimits(l))
				fits := strings.Contains(string(r.Stdout), "ALLOCATED")
				if l == large && (r.Status != StatusOK || !fits) {
					t.Fatalf("run %d: 150 MiB in %d MiB: status %s (%s), stdout %q", i, l.MemoryBytes>>20, r.Status, r.Reason, r.Stdout)
				}
				if l == small && (r.Status != StatusOOM || fits) {
					t.Fatalf("run %d: 150 MiB in %d MiB: status %s (%s), stdout %q; want OOM", i, l.MemoryBytes>>20, r.Status, r.Reason, r.Stdout)
				}
				if peakResetRefused(t, m) {
					noSpares(t, m, before)
					continue
				}
				cg := spare(t, m, before)
				if prev != "" && cg != prev {
					t.Fatalf("run %d did not run in the cgroup of the run before", i)
				}
				prev = cg
				got := cgroupLimits(t, cg)
				want := wantLimits(l, got)
				for k, v := range want {
					if got[k] != v {
						t.Errorf("run %d: the cgroup's %s limit is %s, want %s (the request's)", i, k, got[k], v)
					}
				}
			}
		})
	}
}

// TestCgroupFilesNotInPayload: while the server holds a reused cgroup's
// control files open, a payload in it — cold, warm or forked — has only
// its standard descriptors.
func TestCgroupFilesNotInPayload(t *testing.T) {
	needJail(t)
	m := spareManager(t, "", 1)
	tpl := startTemplate(t, m)
	modes := []struct {
		name string
		run  func(t testing.TB, m *Manager, code string, opts ...pyOpt) Result
	}{{"cold", runPy}, {"warm", runWarm}, {"forked", forked(tpl)}}
	before := cgroupNames() // the fork server's
	runPy(t, m, "print(1)")
	if peakResetRefused(t, m) {
		t.Skip("this kernel cannot reset memory.peak: no cgroup is kept for reuse")
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			cg := spare(t, m, before)
			r := mode.run(t, m, ownViewProbe)
			ownView(t, r)
			if spare(t, m, before) != cg {
				t.Fatal("the payload did not run in the kept cgroup")
			}
			if n := heldOpen(t, cg); n < 3 {
				t.Fatalf("the server held %d of the cgroup's control files open, want its limits' at least", n)
			}
		})
	}
}
