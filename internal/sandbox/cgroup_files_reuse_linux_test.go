package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cgroupLimits reads the memory, task and CPU limits a jail's cgroup holds
// from the kernel, by path (not through the descriptors the cgroup keeps).
func cgroupLimits(t *testing.T, cg jailCgroup) map[string]string {
	t.Helper()
	files := map[string]string{}
	switch j := cg.(type) {
	case *v1Jail:
		files["memory"] = filepath.Join(j.mem, "memory.limit_in_bytes")
		if j.d.swap {
			files["memory+swap"] = filepath.Join(j.mem, "memory.memsw.limit_in_bytes")
		}
		files["pids"] = filepath.Join(j.pids, "pids.max")
		files["cpu"] = filepath.Join(j.cpu, "cpu.cfs_quota_us")
	case *v2Jail:
		files["memory"] = filepath.Join(j.dir, "memory.max")
		files["pids"] = filepath.Join(j.dir, "pids.max")
		files["cpu"] = filepath.Join(j.dir, "cpu.max")
	default:
		t.Fatalf("unknown cgroup type %T", cg)
	}
	out := map[string]string{}
	for k, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[k] = strings.TrimSpace(string(b))
	}
	return out
}

// wantLimits is what cgroupLimits reads in cg's cgroup when it holds l.
func wantLimits(cg jailCgroup, l Limits) map[string]string {
	mem := strconv.FormatInt(l.MemoryBytes, 10)
	quota, period := cpuQuota(l.CPUs)
	out := map[string]string{"memory": mem, "pids": strconv.FormatInt(l.Pids, 10)}
	switch j := cg.(type) {
	case *v1Jail:
		if j.d.swap {
			out["memory+swap"] = mem
		}
		out["cpu"] = strconv.FormatInt(quota, 10)
	case *v2Jail:
		out["cpu"] = strconv.FormatInt(quota, 10) + " " + strconv.FormatUint(period, 10)
	}
	return out
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
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			var prev jailCgroup
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
					noSpares(t, m)
					continue
				}
				cg := spare(t, m)
				if prev != nil && cg != prev {
					t.Fatalf("run %d did not run in the cgroup of the run before", i)
				}
				prev = cg
				got, want := cgroupLimits(t, cg), wantLimits(cg, l)
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
	runPy(t, m, "print(1)")
	if peakResetRefused(t, m) {
		t.Skip("this kernel cannot reset memory.peak: no cgroup is kept for reuse")
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			cg := spare(t, m)
			r := mode.run(t, m, ownViewProbe)
			ownView(t, r)
			if spare(t, m) != cg {
				t.Fatal("the payload did not run in the kept cgroup")
			}
			var files *ctlFiles
			switch j := cg.(type) {
			case *v1Jail:
				files = &j.files
			case *v2Jail:
				files = &j.files
			}
			if n := len(openFds(files)); n < 3 {
				t.Fatalf("the server held %d of the cgroup's control files open, want its limits' at least", n)
			}
		})
	}
}
