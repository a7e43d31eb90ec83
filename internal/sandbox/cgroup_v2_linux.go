package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup2"
	"golang.org/x/sys/unix"
)

const v2Mount = "/sys/fs/cgroup"

// cgroupV2 creates jail cgroups on the unified hierarchy. The cgroup v2
// "no internal processes" rule means a cgroup that holds processes cannot
// hand controllers to children; so, unless the server runs in the root
// cgroup, it moves itself into a "server" leaf of its own cgroup first and
// creates jails beside it, under <own>/<parent>/<id> (the layout systemd's
// Delegate=yes expects).
type cgroupV2 struct {
	base string // <own>/<parent>, relative to v2Mount
}

var v2Wanted = []string{"memory", "pids", "cpu"}

func newCgroupV2(parent string) (*cgroupV2, error) {
	_, own, err := cgroups.ParseCgroupFileUnified("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("reading own cgroup: %w", err)
	}
	if own == "" {
		own = "/"
	}
	if own != "/" {
		if err := v2MoveSelfToLeaf(own); err != nil {
			return nil, err
		}
	}
	d := &cgroupV2{base: filepath.Join(own, parent)}
	if err := v2Enable(own); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(v2Mount, d.base), 0o755); err != nil {
		return nil, fmt.Errorf("creating cgroup parent: %w", err)
	}
	if err := v2Enable(d.base); err != nil {
		return nil, err
	}
	return d, nil
}

// v2MoveSelfToLeaf moves every process of the server's cgroup into a
// "server" child so that the cgroup may delegate controllers.
func v2MoveSelfToLeaf(own string) error {
	leaf := filepath.Join(v2Mount, own, "server")
	if err := os.MkdirAll(leaf, 0o755); err != nil {
		return fmt.Errorf("creating server leaf cgroup: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(v2Mount, own, "cgroup.procs"))
	if err != nil {
		return err
	}
	for _, pid := range strings.Fields(string(b)) {
		if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(pid), 0); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("moving pid %s to server leaf cgroup: %w", pid, err)
		}
	}
	return nil
}

// v2Enable turns on the controllers jails need in group's subtree_control;
// a controller that the parent does not offer is an error (fail closed).
func v2Enable(group string) error {
	dir := filepath.Join(v2Mount, group)
	avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("reading controllers of %s: %w", group, err)
	}
	have := strings.Fields(string(avail))
	for _, c := range v2Wanted {
		found := false
		for _, h := range have {
			found = found || h == c
		}
		if !found {
			return fmt.Errorf("%w: cgroup v2 controller %q is not available in %s", ErrUnsupported, c, group)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+c), 0); err != nil {
			return fmt.Errorf("enabling cgroup controller %s in %s: %w", c, group, err)
		}
	}
	return nil
}

func (d *cgroupV2) describe() string { return "cgroup v2 (memory, pids, cpu)" }

func v2Resources(l Limits) *cgroup2.Resources {
	mem := l.MemoryBytes
	var zero int64
	quota, period := cpuQuota(l.CPUs)
	return &cgroup2.Resources{
		Memory: &cgroup2.Memory{Max: &mem, Swap: &zero},
		Pids:   &cgroup2.Pids{Max: l.Pids},
		CPU:    &cgroup2.CPU{Max: cgroup2.NewCPUMax(&quota, &period)},
	}
}

func (d *cgroupV2) create(id string, initial Limits) (jailCgroup, error) {
	m, err := cgroup2.NewManager(v2Mount, filepath.Join(d.base, id), v2Resources(initial))
	if err != nil {
		return nil, fmt.Errorf("creating cgroup: %w", err)
	}
	dir := filepath.Join(v2Mount, d.base, id)
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = m.Delete()
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return &v2Jail{m: m, dir: dir, fd: fd}, nil
}

func (d *cgroupV2) sweep(prefix string) (int, error) {
	entries, err := os.ReadDir(filepath.Join(v2Mount, d.base))
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		m, err := cgroup2.Load(filepath.Join(d.base, e.Name()))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		j := &v2Jail{m: m, dir: filepath.Join(v2Mount, d.base, e.Name()), fd: -1}
		if err := j.destroy(); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

type v2Jail struct {
	m   *cgroup2.Manager
	dir string
	fd  int
}

func (j *v2Jail) intoFD() int { return j.fd }

func (j *v2Jail) add(pid int) error {
	if err := j.m.AddProc(uint64(pid)); err != nil {
		return fmt.Errorf("adding pid %d to cgroup: %w", pid, err)
	}
	return nil
}

func (j *v2Jail) setLimits(l Limits) error {
	if err := j.m.Update(v2Resources(l)); err != nil {
		return fmt.Errorf("setting cgroup limits: %w", err)
	}
	return nil
}

func (j *v2Jail) cpuUsage() (time.Duration, error) {
	us, err := readKey(filepath.Join(j.dir, "cpu.stat"), "usage_usec")
	return time.Duration(us) * time.Microsecond, err
}

func (j *v2Jail) current() (int64, error) {
	return readInt(filepath.Join(j.dir, "memory.current"))
}

func (j *v2Jail) usage() (int64, bool, error) {
	// memory.peak exists since Linux 5.19; older kernels report 0.
	peak, err := readInt(filepath.Join(j.dir, "memory.peak"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, false, err
	}
	kills, err := readKey(filepath.Join(j.dir, "memory.events"), "oom_kill")
	return peak, kills > 0, err
}

func (j *v2Jail) destroy() error {
	if j.fd >= 0 {
		_ = unix.Close(j.fd)
		j.fd = -1
	}
	// cgroup.kill (5.14+) kills every task, including stopped ones.
	if err := j.m.Kill(); err != nil {
		killProcs(filepath.Join(j.dir, "cgroup.procs"))
	}
	if err := waitEmpty(filepath.Join(j.dir, "cgroup.procs"), 5*time.Second); err != nil {
		return err
	}
	if err := j.m.Delete(); err != nil {
		return fmt.Errorf("removing cgroup %s: %w", j.dir, err)
	}
	return nil
}
