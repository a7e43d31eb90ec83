package cgroups

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestSparesAreBounded: the list keeps at most its size, hands the last
// kept back first, and keeps nothing once closed.
func TestSparesAreBounded(t *testing.T) {
	s := spares{max: 2}
	a, b, c := &v1Jail{id: "a"}, &v1Jail{id: "b"}, &v1Jail{id: "c"}
	if !s.put(a) || !s.put(b) {
		t.Fatal("a list of two refused its first two cgroups")
	}
	if s.put(c) {
		t.Error("a full list kept a third cgroup")
	}
	if got := s.take(); got != b {
		t.Errorf("took %v, want the last one kept", got)
	}
	if left := s.drain(false); len(left) != 1 || left[0] != a {
		t.Errorf("drain returned %v, want the one left", left)
	}
	if !s.put(a) {
		t.Error("a list emptied without closing refused a cgroup")
	}
	if left := s.drain(true); len(left) != 1 || left[0] != a {
		t.Errorf("drain returned %v, want the one kept", left)
	}
	if s.put(c) {
		t.Error("a closed list kept a cgroup")
	}
	if got := s.take(); got != nil {
		t.Errorf("a closed list gave %v", got)
	}
}

// TestBaselineArithmetic: a reused cgroup reports what was added since it
// was taken.
func TestBaselineArithmetic(t *testing.T) {
	b := baseline{cpu: 2 * time.Second, ooms: 3}
	if got := b.cpuSince(2*time.Second + 40*time.Millisecond); got != 40*time.Millisecond {
		t.Errorf("cpuSince = %s, want 40ms", got)
	}
	if got := b.cpuSince(time.Second); got != 0 {
		t.Errorf("a counter below the baseline gave %s, want 0", got)
	}
	if b.oomSince(3) || !b.oomSince(4) {
		t.Error("oomSince must report only kills after the baseline")
	}
	var fresh baseline
	if got := fresh.cpuSince(time.Second); got != time.Second || !fresh.oomSince(1) {
		t.Error("a new cgroup's baseline must report its counters as they are")
	}
}

// fakeV2Jail is a v2 jail over a plain directory holding the files the
// kernel would, for the logic that does not need the kernel's semantics.
func fakeV2Jail(t *testing.T) (*v2Jail, func(name, val string)) {
	t.Helper()
	dir := t.TempDir()
	write := func(name, val string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(val), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, val := range map[string]string{
		"cgroup.procs": "", "cgroup.events": "populated 0\nfrozen 0\n", "pids.current": "0\n",
		"memory.current": "4096\n", "memory.peak": "300000000\n", "cpu.stat": "usage_usec 2000000\nuser_usec 1500000\n",
		"memory.events": "low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\n",
		// The limits' files exist in a cgroup: writing one must not create
		// it (mode 0, unreadable to the rootless run of make test-vm).
		"memory.max": "max\n", "pids.max": "max\n", "cpu.max": "max 100000\n",
	} {
		write(name, val)
	}
	j := &v2Jail{d: &cgroupV2{l: &v2Layout{}}, dir: dir, fd: -1}
	t.Cleanup(j.files.close)
	return j, write
}

// TestV2ReuseCountsFromTheTake (cgroup v2 logic on plain files): after
// reuse, peak memory is read through the descriptor the reset was written
// to, CPU time and OOM kills are what was added since.
func TestV2ReuseCountsFromTheTake(t *testing.T) {
	j, write := fakeV2Jail(t)
	if peak, oom, err := j.Usage(); err != nil || peak != 300000000 || !oom {
		t.Fatalf("new cgroup: peak %d, oom %v, err %v; want its own counters", peak, oom, err)
	}
	if err := j.vacate(); err != nil {
		t.Fatalf("vacate of an empty cgroup: %v", err)
	}
	l := defaultLimits()
	if err := j.reuse(l); err != nil {
		t.Fatalf("reuse: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(j.dir, "memory.max")); string(b) != strconv.FormatInt(l.MemoryBytes, 10) {
		t.Errorf("memory.max = %q after reuse, want the new limit", b)
	}
	// What the kernel would show after the next execution.
	write("memory.peak", "5000000\n")
	write("cpu.stat", "usage_usec 2030000\nuser_usec 1520000\n")
	peak, oom, err := j.Usage()
	if err != nil || peak != 5000000 || oom {
		t.Errorf("reused: peak %d, oom %v, err %v; want 5000000 and no OOM kill", peak, oom, err)
	}
	if cpu, err := j.CPUUsage(); err != nil || cpu != 30*time.Millisecond {
		t.Errorf("reused: cpu %s (err %v), want 30ms", cpu, err)
	}
	write("memory.events", "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\n")
	if _, oom, _ := j.Usage(); !oom {
		t.Error("an OOM kill after the take was not reported")
	}
}

// TestV2VacateFailsClosed (cgroup v2 logic on plain files): a cgroup with
// a task, a zombie or memory left, or whose peak cannot be reset, is not
// reused.
func TestV2VacateFailsClosed(t *testing.T) {
	for _, c := range []struct{ name, file, val string }{
		{"populated", "cgroup.events", "populated 1\nfrozen 0\n"},
		{"unreaped task", "pids.current", "1\n"},
		{"memory left", "memory.current", strconv.Itoa(2*spareMaxCharge) + "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			j, write := fakeV2Jail(t)
			write(c.file, c.val)
			if err := j.vacate(); err == nil {
				t.Error("vacate accepted the cgroup")
			}
		})
	}
	t.Run("no peak reset", func(t *testing.T) {
		j, _ := fakeV2Jail(t)
		// A directory cannot be opened for writing, as memory.peak
		// cannot before Linux 6.12.
		peak := filepath.Join(j.dir, "memory.peak")
		if err := os.Remove(peak); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(peak, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := j.reuse(defaultLimits()); err == nil {
			t.Fatal("reuse succeeded without resetting the peak")
		}
		if err := j.vacate(); err == nil {
			t.Error("a cgroup was vacated for reuse on a kernel that cannot reset its peak")
		}
	})
}

// TestV2RemovedSpareKeepsReuseOn (cgroup v2 logic on plain files): a spare
// whose directory was removed meanwhile (a sweep) fails its reuse without
// taking the kernel for one that cannot reset memory.peak.
func TestV2RemovedSpareKeepsReuseOn(t *testing.T) {
	j, _ := fakeV2Jail(t)
	if err := os.RemoveAll(j.dir); err != nil {
		t.Fatal(err)
	}
	if err := j.reuse(defaultLimits()); err == nil {
		t.Fatal("reuse of a removed cgroup succeeded")
	}
	if j.d.noPeakReset.Load() {
		t.Error("a removed cgroup switched reuse off")
	}
}

// TestV2FailedLimitsAreRewrittenOnReuse (cgroup v2 logic on plain files):
// when writing limits fails half-way, the next limits are all written: a
// reused cgroup must not keep a limit of the execution before (here its
// larger memory.max) because the new value equals one never applied.
func TestV2FailedLimitsAreRewrittenOnReuse(t *testing.T) {
	j, write := fakeV2Jail(t)
	small := defaultLimits()
	if err := j.SetLimits(small); err != nil {
		t.Fatal(err)
	}
	// pids.max cannot be written (its descriptor is read-only now):
	// memory.max is, before it.
	pids := breakCtlFile(t, &j.files, j.dir, "pids.max")
	big := small
	big.MemoryBytes *= 2
	big.Pids++
	if err := j.SetLimits(big); err == nil {
		t.Fatal("setLimits succeeded without pids.max")
	}
	pids()
	if err := j.vacate(); err != nil {
		t.Fatal(err)
	}
	write("memory.max", "") // what reuse writes shows alone
	if err := j.reuse(small); err != nil {
		t.Fatalf("reuse: %v", err)
	}
	want := strconv.FormatInt(small.MemoryBytes, 10)
	if b, _ := os.ReadFile(filepath.Join(j.dir, "memory.max")); string(b) != want {
		t.Errorf("memory.max = %q after reuse, want %s", b, want)
	}
}
