package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	"golang.org/x/sys/unix"
)

// v1Controllers are the hierarchies a jail joins on cgroup v1.
var v1Controllers = []cgroup1.Name{cgroup1.Memory, cgroup1.Pids, cgroup1.Cpu, cgroup1.Cpuacct}

// cgroupV1 creates jail cgroups under <server's own cgroup>/<parent> in each
// v1 hierarchy, so an operator's limits on the server also bound its jails.
type cgroupV1 struct {
	mounts map[cgroup1.Name]string // hierarchy mount point
	base   map[cgroup1.Name]string // <own cgroup>/<parent>, relative to the mount
	swap   bool                    // memory.memsw.* exists: swap can be capped
}

func newCgroupV1(parent string) (*cgroupV1, error) {
	own, err := cgroup1.ParseCgroupFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("reading own cgroups: %w", err)
	}
	d := &cgroupV1{mounts: map[cgroup1.Name]string{}, base: map[cgroup1.Name]string{}}
	for _, n := range v1Controllers {
		mnt, err := v1Mount(n)
		if err != nil {
			return nil, err
		}
		d.mounts[n] = mnt
		d.base[n] = filepath.Join(own[string(n)], parent)
	}
	_, err = os.Stat(filepath.Join(d.mounts[cgroup1.Memory], "memory.memsw.limit_in_bytes"))
	d.swap = err == nil
	// Each controller is reached as <dir of the hierarchies>/<name>: a
	// co-mounted "cpu,cpuacct" needs the usual "cpu" and "cpuacct"
	// symlinks beside it.
	root := ""
	for _, n := range v1Controllers {
		r := filepath.Dir(d.mounts[n])
		if root != "" && r != root {
			return nil, fmt.Errorf("%w: cgroup v1 hierarchies are mounted in different directories", ErrUnsupported)
		}
		root = r
		if _, err := os.Stat(filepath.Join(root, string(n))); err != nil {
			return nil, fmt.Errorf("%w: cgroup v1 controller %s is not reachable at %s", ErrUnsupported, n, filepath.Join(root, string(n)))
		}
		// The jail's directories are written directly: resolve the
		// "cpu" → "cpu,cpuacct" symlinks once.
		if d.mounts[n], err = filepath.EvalSymlinks(filepath.Join(root, string(n))); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// v1Mount finds the mount point of one v1 controller. cpu and cpuacct are
// often co-mounted ("cpu,cpuacct"); here they may also be separate.
func v1Mount(n cgroup1.Name) (string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok || !strings.HasPrefix(post, "cgroup ") {
			continue
		}
		fields := strings.Fields(post)
		preFields := strings.Fields(pre)
		if len(fields) < 3 || len(preFields) < 5 {
			continue
		}
		for _, opt := range strings.Split(fields[2], ",") {
			if opt == string(n) {
				return preFields[4], nil
			}
		}
	}
	return "", fmt.Errorf("%w: cgroup v1 controller %q is not mounted", ErrUnsupported, n)
}

func (d *cgroupV1) describe() string {
	s := fmt.Sprintf("cgroup v1 (memory, pids, cpu, cpuacct); jails under %s", filepath.Join(d.mounts[cgroup1.Memory], d.base[cgroup1.Memory]))
	if !d.swap {
		s += "; swap accounting off: swap is not capped"
	}
	return s
}

// reusable: writing 0 to memory.max_usage_in_bytes resets the peak on
// every kernel.
func (d *cgroupV1) reusable() bool { return true }

func (d *cgroupV1) create(id string, initial Limits) (Cgroup, error) {
	j := d.jail(id)
	for _, dir := range j.dirs() {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			j.destroy()
			return nil, fmt.Errorf("creating cgroup: %w", err)
		}
	}
	if err := j.SetLimits(initial); err != nil {
		j.destroy()
		return nil, err
	}
	// Without swap accounting, at least keep the kernel from swapping the
	// jail out instead of OOM-killing it at its limit.
	if !d.swap {
		_ = os.WriteFile(filepath.Join(j.mem, "memory.swappiness"), []byte("0"), 0)
	}
	return j, nil
}

func (d *cgroupV1) sweep(prefix string) (int, error) {
	// A predecessor killed while it removed a jail may have removed it
	// from some hierarchies only: the names come from all of them.
	var names []string
	for _, c := range v1Controllers {
		entries, err := os.ReadDir(filepath.Join(d.mounts[c], d.base[c]))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return 0, err
		}
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), prefix) && !slices.Contains(names, e.Name()) {
				names = append(names, e.Name())
			}
		}
	}
	n := 0
	var errs []error
	for _, name := range names {
		j := d.jail(name)
		if err := j.destroy(); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// v1Jail is one jail's directory in each hierarchy, written directly: the
// per-execution cost of containerd's walks over every hierarchy was more
// than the rest of a forked execution. The files read or written on every
// execution stay open (files) until destroy.
type v1Jail struct {
	d                    *cgroupV1
	id                   string
	mem, pids, cpu, acct string   // its directory in each hierarchy
	files                ctlFiles // its open control files
	last                 applied  // what SetLimits last wrote
	base                 baseline // counters when it was last reused
	// partial is set when a task was added to some hierarchies only: it
	// may then be in one whose emptiness vacate does not read.
	partial bool
}

// jail is the v1Jail named id (its directories are not made here).
func (d *cgroupV1) jail(id string) *v1Jail {
	dir := func(n cgroup1.Name) string { return filepath.Join(d.mounts[n], d.base[n], id) }
	return &v1Jail{d: d, id: id, mem: dir(cgroup1.Memory), pids: dir(cgroup1.Pids), cpu: dir(cgroup1.Cpu), acct: dir(cgroup1.Cpuacct)}
}

// dirs are the jail's directories, one per hierarchy (cpu and cpuacct may
// be one).
func (j *v1Jail) dirs() []string {
	var out []string
	for _, dir := range []string{j.mem, j.pids, j.cpu, j.acct} {
		if !slices.Contains(out, dir) {
			out = append(out, dir)
		}
	}
	return out
}

func (j *v1Jail) IntoFD() int { return -1 }

func (j *v1Jail) Add(pid int) error {
	s := strconv.Itoa(pid)
	for _, dir := range j.dirs() {
		if err := j.files.write(dir, "cgroup.procs", s); err != nil {
			j.partial = true
			return fmt.Errorf("adding pid %d to cgroup: %w", pid, err)
		}
	}
	return nil
}

// SetLimits writes the limits that differ from what the cgroup was last
// given, controller by controller (v1_memory_linux.go, v1_pids_linux.go,
// v1_cpu_linux.go).
func (j *v1Jail) SetLimits(l Limits) error {
	return j.last.apply(l, j.setMemory, j.setPids, j.setCPU)
}

func (j *v1Jail) vacate() error {
	if j.partial {
		return errors.New("a task joined some of its hierarchies only")
	}
	// Every task of the jail entered the pids hierarchy (Add writes them
	// all or sets partial) and only Add moves tasks in: none charged to
	// its pids cgroup means none in any of its cgroups. The jail is dead,
	// so what is charged is at most a zombie its parent reaps in a moment;
	// only when the counter does not drop is the pid list read (costly on
	// v1: the kernel builds it) to kill what is left.
	if vacated(j.pidsCurrent, 10*time.Millisecond) != nil {
		killProcs(filepath.Join(j.pids, "cgroup.procs"))
		if err := vacated(j.pidsCurrent, time.Second); err != nil {
			return err
		}
	}
	return chargeFree(j.Current, 100*time.Millisecond)
}

func (j *v1Jail) reuse(l Limits) error {
	b, err := newBaseline(j)
	if err != nil {
		return err
	}
	j.base = b
	return j.SetLimits(l)
}

func (j *v1Jail) destroy() error {
	j.files.close()
	// Every task of a jail is in all its hierarchies: once the pids one is
	// empty, so are the others (each read of a v1 cgroup.procs costs the
	// kernel a pid list: they are kept few).
	procs := filepath.Join(j.pids, "cgroup.procs")
	killProcs(procs)
	if err := waitEmpty(procs, 5*time.Second); err != nil {
		return err
	}
	// A jail's cgroup has no children: one rmdir per hierarchy (cpu and
	// cpuacct may be one directory) instead of containerd's Delete, whose
	// walk of every hierarchy costs more than the rest of an execution.
	var errs []error
	for _, dir := range j.dirs() {
		err := rmdirRetry(dir)
		if errors.Is(err, unix.EBUSY) {
			// A task that joined this hierarchy but not the pids one
			// (a failed add): kill it here.
			killProcs(filepath.Join(dir, "cgroup.procs"))
			_ = waitEmpty(filepath.Join(dir, "cgroup.procs"), time.Second)
			err = rmdirRetry(dir)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("removing cgroup %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}
