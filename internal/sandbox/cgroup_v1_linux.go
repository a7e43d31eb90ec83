package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// v1Controllers are the hierarchies a jail joins on cgroup v1.
var v1Controllers = []cgroup1.Name{cgroup1.Memory, cgroup1.Pids, cgroup1.Cpu, cgroup1.Cpuacct}

// cgroupV1 creates jail cgroups under <server's own cgroup>/<parent> in each
// v1 hierarchy, so an operator's limits on the server also bound its jails.
type cgroupV1 struct {
	mounts map[cgroup1.Name]string // hierarchy mount point
	base   map[cgroup1.Name]string // <own cgroup>/<parent>, relative to the mount
	subs   []cgroup1.Subsystem
	swap   bool // memory.memsw.* exists: swap can be capped
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
	// containerd's controllers take the directory holding the hierarchies
	// and append their own name, so a co-mounted "cpu,cpuacct" needs the
	// usual "cpu" and "cpuacct" symlinks beside it.
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
		d.mounts[n] = filepath.Join(root, string(n))
	}
	d.subs = []cgroup1.Subsystem{
		cgroup1.NewMemory(root, cgroup1.OptionalSwap()),
		cgroup1.NewPids(root),
		cgroup1.NewCpu(root),
		cgroup1.NewCpuacct(root),
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
	s := "cgroup v1 (memory, pids, cpu, cpuacct)"
	if !d.swap {
		s += "; swap accounting off: swap is not capped"
	}
	return s
}

func (d *cgroupV1) path(id string) cgroup1.Path {
	return func(n cgroup1.Name) (string, error) {
		b, ok := d.base[n]
		if !ok {
			return "", cgroup1.ErrControllerNotActive
		}
		return filepath.Join(b, id), nil
	}
}

func (d *cgroupV1) hierarchy() ([]cgroup1.Subsystem, error) { return d.subs, nil }

func (d *cgroupV1) create(id string, initial Limits) (jailCgroup, error) {
	cg, err := cgroup1.New(d.path(id), v1Resources(initial, d.swap), cgroup1.WithHierarchy(d.hierarchy))
	if err != nil {
		return nil, fmt.Errorf("creating cgroup: %w", err)
	}
	j := &v1Jail{d: d, id: id, cg: cg}
	// Without swap accounting, at least keep the kernel from swapping the
	// jail out instead of OOM-killing it at its limit.
	if !d.swap {
		_ = os.WriteFile(j.file(cgroup1.Memory, "memory.swappiness"), []byte("0"), 0)
	}
	return j, nil
}

func v1Resources(l Limits, swap bool) *specs.LinuxResources {
	mem := l.MemoryBytes
	pids := l.Pids
	quota, period := cpuQuota(l.CPUs)
	r := &specs.LinuxResources{
		Memory: &specs.LinuxMemory{Limit: &mem},
		Pids:   &specs.LinuxPids{Limit: &pids},
		CPU:    &specs.LinuxCPU{Quota: &quota, Period: &period},
	}
	if swap {
		r.Memory.Swap = &mem // memsw = memory + swap: equal means no swap
	}
	return r
}

func (d *cgroupV1) sweep(prefix string) (int, error) {
	n := 0
	var errs []error
	entries, err := os.ReadDir(filepath.Join(d.mounts[cgroup1.Memory], d.base[cgroup1.Memory]))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		return 0, err
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		j := &v1Jail{d: d, id: e.Name()}
		cg, err := cgroup1.Load(d.path(e.Name()), cgroup1.WithHierarchy(d.hierarchy))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		j.cg = cg
		if err := j.destroy(); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

type v1Jail struct {
	d  *cgroupV1
	id string
	cg cgroup1.Cgroup
}

func (j *v1Jail) file(n cgroup1.Name, name string) string {
	return filepath.Join(j.d.mounts[n], j.d.base[n], j.id, name)
}

func (j *v1Jail) intoFD() int { return -1 }

func (j *v1Jail) add(pid int) error {
	if err := j.cg.AddProc(uint64(pid)); err != nil {
		return fmt.Errorf("adding pid %d to cgroup: %w", pid, err)
	}
	return nil
}

func (j *v1Jail) setLimits(l Limits) error {
	// memory.memsw.limit_in_bytes may never be below memory.limit_in_bytes:
	// raising both, memsw goes first; lowering, the plain limit goes first.
	mem := strconv.FormatInt(l.MemoryBytes, 10)
	files := []string{"memory.limit_in_bytes"}
	if j.d.swap {
		files = append(files, "memory.memsw.limit_in_bytes")
		if cur, err := readInt(j.file(cgroup1.Memory, "memory.limit_in_bytes")); err == nil && l.MemoryBytes > cur {
			files[0], files[1] = files[1], files[0]
		}
	}
	for _, f := range files {
		if err := os.WriteFile(j.file(cgroup1.Memory, f), []byte(mem), 0); err != nil {
			return fmt.Errorf("setting cgroup limits: %w", err)
		}
	}
	r := v1Resources(l, j.d.swap)
	r.Memory = nil
	if err := j.cg.Update(r); err != nil {
		return fmt.Errorf("setting cgroup limits: %w", err)
	}
	return nil
}

func (j *v1Jail) cpuUsage() (time.Duration, error) {
	ns, err := readInt(j.file(cgroup1.Cpuacct, "cpuacct.usage"))
	return time.Duration(ns), err
}

func (j *v1Jail) current() (int64, error) {
	return readInt(j.file(cgroup1.Memory, "memory.usage_in_bytes"))
}

func (j *v1Jail) usage() (int64, bool, error) {
	peak, err := readInt(j.file(cgroup1.Memory, "memory.max_usage_in_bytes"))
	if err != nil {
		return 0, false, err
	}
	kills, err := readKey(j.file(cgroup1.Memory, "memory.oom_control"), "oom_kill")
	return peak, kills > 0, err
}

func (j *v1Jail) destroy() error {
	procs := j.file(cgroup1.Pids, "cgroup.procs")
	killProcs(procs)
	if err := waitEmpty(procs, 5*time.Second); err != nil {
		return err
	}
	for _, n := range v1Controllers {
		killProcs(j.file(n, "cgroup.procs"))
		_ = waitEmpty(j.file(n, "cgroup.procs"), time.Second)
	}
	if err := j.cg.Delete(); err != nil {
		return fmt.Errorf("removing cgroup %s: %w", j.id, err)
	}
	return nil
}
