package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// breakCtlFile makes writes of dir/name through c fail from now on (its
// descriptor is swapped for a read-only one), as the kernel refusing a
// value would; the returned func repairs it.
func breakCtlFile(t *testing.T, c *ctlFiles, dir, name string) func() {
	t.Helper()
	key := ctlKey{dir, name, unix.O_WRONLY}
	ro, err := unix.Open(filepath.Join(dir, name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if fd, ok := c.fds[key]; ok {
		_ = unix.Close(fd)
	}
	if c.fds == nil {
		c.fds = map[ctlKey]int{}
	}
	c.fds[key] = ro
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		_ = unix.Close(c.fds[key])
		delete(c.fds, key)
	}
}

// openFds returns the descriptors c holds.
func openFds(c *ctlFiles) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for _, fd := range c.fds {
		out = append(out, fd)
	}
	return out
}

// TestCtlFilesStayOpenUntilClose: a control file is opened once,
// close-on-exec, read and written through that descriptor at offset 0,
// and closed with the set; every access after that fails.
func TestCtlFilesStayOpenUntilClose(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"pids.max", "memory.events"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var c ctlFiles
	for _, v := range []string{"100", "200"} {
		if err := c.write(dir, "pids.max", v); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "pids.max")); string(b) != v {
			t.Fatalf("pids.max holds %q after writing %s, want it written at offset 0", b, v)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "memory.events"), []byte("oom 3\noom_kill 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if n, err := c.readKey(dir, "memory.events", "oom_kill"); err != nil || n != 2 {
			t.Fatalf("oom_kill = %d (%v), want 2 on every read", n, err)
		}
	}
	if n, err := c.readInt(dir, "pids.max"); err != nil || n != 200 {
		t.Fatalf("pids.max read back as %d (%v), want 200", n, err)
	}
	fds := openFds(&c)
	if len(fds) != 3 { // pids.max written and read, memory.events read
		t.Fatalf("%d descriptors after repeated accesses to 2 files, want one per file and mode (3)", len(fds))
	}
	for _, fd := range fds {
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("descriptor %d: flags %#x (%v), want close-on-exec", fd, flags, err)
		}
	}
	c.close()
	for _, fd := range fds {
		if target, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)); err == nil && filepath.Dir(target) == dir {
			t.Errorf("descriptor %d still open on %s after close", fd, target)
		}
	}
	if err := c.write(dir, "pids.max", "1"); !errors.Is(err, errCtlClosed) {
		t.Errorf("write after close: %v, want %v", err, errCtlClosed)
	}
	if _, err := c.readInt(dir, "pids.max"); !errors.Is(err, errCtlClosed) {
		t.Errorf("read after close: %v, want %v", err, errCtlClosed)
	}
}

// TestCtlFilesFailClosed: a file that does not exist is not created, and
// one longer than a control file may be is an error, not a value read
// from its first part.
func TestCtlFilesFailClosed(t *testing.T) {
	dir := t.TempDir()
	var c ctlFiles
	defer c.close()
	if err := c.write(dir, "memory.max", "1"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("write of a missing file: %v, want ErrNotExist", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "memory.max")); err == nil {
		t.Error("a write created the missing file")
	}
	long := make([]byte, 0, 2*ctlReadMax)
	for len(long) < 2*ctlReadMax {
		long = append(long, "nr_periods 1\n"...)
	}
	long = append(long, "usage_usec 5\n"...)
	if err := os.WriteFile(filepath.Join(dir, "cpu.stat"), long, 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := c.readKey(dir, "cpu.stat", "usage_usec"); err == nil {
		t.Errorf("read a %d-byte file as usage_usec %d, want an error", len(long), n)
	}
}

// fakeV1Jail is a v1 jail whose hierarchies are one plain directory with
// swap accounting, holding the files the kernel would.
func fakeV1Jail(t *testing.T) *v1Jail {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "pids.max", "cpu.cfs_period_us", "cpu.cfs_quota_us"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	j := &v1Jail{d: &cgroupV1{swap: true}, id: "fake", mem: dir, pids: dir, cpu: dir, acct: dir}
	t.Cleanup(j.files.close)
	return j
}

// limitFiles are the files holding each limit, per cgroup version.
var limitFiles = map[string][]string{
	"v1": {"memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "pids.max", "cpu.cfs_quota_us"},
	"v2": {"memory.max", "pids.max", "cpu.max"},
}

// TestLimitsWrittenOnlyWhenChanged (both versions, on plain files): a
// limit is written again only when its value differs from what this
// cgroup was last given, and after a failed write every limit is
// written again.
func TestLimitsWrittenOnlyWhenChanged(t *testing.T) {
	for _, v := range []string{"v1", "v2"} {
		t.Run(v, func(t *testing.T) {
			var (
				cg    Cgroup
				dir   string
				files *ctlFiles
			)
			if v == "v1" {
				j := fakeV1Jail(t)
				cg, dir, files = j, j.mem, &j.files
			} else {
				j, _ := fakeV2Jail(t)
				cg, dir, files = j, j.dir, &j.files
			}
			// written lists the limit files written since the last call.
			written := func() map[string]string {
				out := map[string]string{}
				for _, f := range limitFiles[v] {
					p := filepath.Join(dir, f)
					if b, _ := os.ReadFile(p); len(b) > 0 {
						out[f] = string(b)
					}
					if err := os.WriteFile(p, nil, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				return out
			}
			a := defaultLimits()
			if err := cg.SetLimits(a); err != nil {
				t.Fatal(err)
			}
			if got := written(); len(got) != len(limitFiles[v]) {
				t.Fatalf("first limits wrote %v, want every limit", got)
			}
			if err := cg.SetLimits(a); err != nil {
				t.Fatal(err)
			}
			if got := written(); len(got) != 0 {
				t.Errorf("the same limits again wrote %v, want nothing", got)
			}
			b := a
			b.MemoryBytes = 64 << 20
			if err := cg.SetLimits(b); err != nil {
				t.Fatal(err)
			}
			mem := strconv.FormatInt(b.MemoryBytes, 10)
			want := map[string]string{"memory.limit_in_bytes": mem, "memory.memsw.limit_in_bytes": mem}
			if v == "v2" {
				want = map[string]string{"memory.max": mem}
			}
			if got := written(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("a new memory limit wrote %v, want %v", got, want)
			}
			// The kernel refuses pids.max: what the cgroup holds is
			// unknown, so the next limits are all written, even those
			// equal to what was asked before.
			repair := breakCtlFile(t, files, dir, "pids.max")
			c := b
			c.Pids = 50
			if err := cg.SetLimits(c); err == nil {
				t.Fatal("setLimits succeeded while pids.max could not be written")
			}
			repair()
			written()
			if err := cg.SetLimits(b); err != nil {
				t.Fatal(err)
			}
			if got := written(); len(got) != len(limitFiles[v]) || got["pids.max"] != strconv.FormatInt(b.Pids, 10) {
				t.Errorf("limits after a failed write wrote %v, want every limit", got)
			}
		})
	}
}

// TestReuseKeepsItsDescriptors (cgroup v2 logic on plain files): a cgroup
// reused again and again opens no further descriptor after its first
// execution: memory.peak is reset through the one it was reset through
// before, and every other file through its own.
func TestReuseKeepsItsDescriptors(t *testing.T) {
	j, write := fakeV2Jail(t)
	small, large := defaultLimits(), defaultLimits()
	large.MemoryBytes, large.Pids, large.CPUs = 1<<30, 256, 2
	cycle := func(l Limits) {
		t.Helper()
		if err := j.vacate(); err != nil {
			t.Fatal(err)
		}
		if err := j.reuse(large); err != nil {
			t.Fatal(err)
		}
		if err := j.Add(4321); err != nil {
			t.Fatal(err)
		}
		if err := j.SetLimits(l); err != nil {
			t.Fatal(err)
		}
		if _, err := j.CPUUsage(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := j.Usage(); err != nil {
			t.Fatal(err)
		}
	}
	cycle(small)
	before := openFds(&j.files)
	for _, l := range []Limits{large, small, large, small} {
		cycle(l)
	}
	write("memory.peak", "7000000\n") // what the kernel would show at the end
	if after := openFds(&j.files); len(after) != len(before) {
		t.Errorf("%d descriptors after five reuses, %d after the first: one opened per reuse", len(after), len(before))
	}
	if peak, _, err := j.Usage(); err != nil || peak != 7000000 {
		t.Errorf("peak %d (%v) through the reset descriptor, want what memory.peak holds", peak, err)
	}
}
