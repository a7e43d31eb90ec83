package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupV2 creates jail cgroups on the unified hierarchy, below the
// jails' parent that setupV2 prepared. A jail's files are written
// directly: each is one small write, and a jail is created and removed
// per execution.
type cgroupV2 struct {
	l *v2Layout
	// noPeakReset is set when the kernel refused to reset memory.peak, at
	// start or later (before Linux 6.12): its cgroups are never reused.
	noPeakReset atomic.Bool
}

func newCgroupV2(parent string) (*cgroupV2, error) {
	l, err := setupV2(parent)
	if err != nil {
		return nil, err
	}
	d := &cgroupV2{l: l}
	// Reuse needs the peak reset of Linux 6.12; tried once on the jails'
	// parent (a reset there only changes what that descriptor reads), so
	// that an older kernel never keeps a cgroup it cannot reset.
	if !peakResettable(filepath.Join(v2Mount, l.base)) {
		d.noPeakReset.Store(true)
	}
	return d, nil
}

// peakResettable reports whether the kernel takes a write to dir's
// memory.peak.
func peakResettable(dir string) bool {
	fd, err := unix.Open(filepath.Join(dir, "memory.peak"), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	_, err = unix.Write(fd, []byte("0"))
	return err == nil
}

func (d *cgroupV2) describe() string {
	if !d.reusable() {
		return d.l.describe() + "; memory.peak cannot be reset (Linux < 6.12): cgroups of finished jails are not reused"
	}
	return d.l.describe()
}

func (d *cgroupV2) reusable() bool { return !d.noPeakReset.Load() }

func (d *cgroupV2) create(id string, initial Limits) (Cgroup, error) {
	dir := filepath.Join(v2Mount, d.l.base, id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating cgroup: %w", err)
	}
	j := &v2Jail{d: d, dir: dir, fd: -1}
	// The whole cgroup is killed when the kernel OOM-kills in it: no
	// half-killed jail goes on running.
	if err := j.write("memory.oom.group", "1"); err != nil {
		_ = j.destroy()
		return nil, fmt.Errorf("setting cgroup limits: %w", err)
	}
	if d.l.swap {
		if err := j.write("memory.swap.max", "0"); err != nil {
			_ = j.destroy()
			return nil, fmt.Errorf("setting cgroup limits: %w", err)
		}
	}
	if err := j.SetLimits(initial); err != nil {
		_ = j.destroy()
		return nil, err
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = j.destroy()
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	j.fd = fd
	return j, nil
}

func (d *cgroupV2) sweep(prefix string) (int, error) {
	entries, err := os.ReadDir(filepath.Join(v2Mount, d.l.base))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		return 0, err
	}
	n := 0
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		j := &v2Jail{d: d, dir: filepath.Join(v2Mount, d.l.base, e.Name()), fd: -1}
		if err := j.destroy(); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// v2Jail is one jail's cgroup directory. The files read or written on
// every execution stay open (files) until destroy.
type v2Jail struct {
	d     *cgroupV2
	dir   string
	fd    int      // O_PATH fd of dir for CLONE_INTO_CGROUP; -1 when closed
	files ctlFiles // its open control files
	last  applied  // what SetLimits last wrote
	base  baseline // counters when it was last reused
	// peakReset is set once reuse reset the peak through peakKey's
	// descriptor: the reset holds for reads through that descriptor only.
	// A new cgroup's peak is its own.
	peakReset bool
}

// write writes a file written once in the cgroup's life, by path.
func (j *v2Jail) write(file, val string) error {
	return os.WriteFile(filepath.Join(j.dir, file), []byte(val), 0)
}

func (j *v2Jail) IntoFD() int { return j.fd }

func (j *v2Jail) Add(pid int) error {
	if err := j.files.write(j.dir, "cgroup.procs", strconv.Itoa(pid)); err != nil {
		return fmt.Errorf("adding pid %d to cgroup: %w", pid, err)
	}
	return nil
}

// SetLimits writes the limits that differ from what the cgroup was last
// given, controller by controller (v2_memory_linux.go, v2_pids_linux.go,
// v2_cpu_linux.go).
func (j *v2Jail) SetLimits(l Limits) error {
	return j.last.apply(l, j.setMemory, j.setPids, j.setCPU)
}

func (j *v2Jail) vacate() error {
	if j.d.noPeakReset.Load() {
		return errors.New("this kernel cannot reset memory.peak (Linux 6.12)")
	}
	// populated counts the tasks of the cgroup and of its descendants
	// (a jail has none); pids.current also the zombies not yet reaped.
	// Usually none is left and nothing needs killing.
	populated := func() (int64, error) { return j.files.readKey(j.dir, "cgroup.events", "populated") }
	if n, err := populated(); err != nil || n != 0 {
		if err := j.killAll(); err != nil {
			return err
		}
		if n, err := populated(); err != nil || n != 0 {
			return fmt.Errorf("cgroup %s is still populated (%v)", j.dir, err)
		}
	}
	if err := vacated(j.pidsCurrent, 100*time.Millisecond); err != nil {
		return err
	}
	return chargeFree(j.Current, 100*time.Millisecond)
}

func (j *v2Jail) reuse(l Limits) error {
	b, err := newBaseline(j)
	if err != nil {
		return err
	}
	j.base = b
	return j.SetLimits(l)
}

// destroy kills every task of the jail and removes its cgroup.
func (j *v2Jail) destroy() error {
	if j.fd >= 0 {
		_ = unix.Close(j.fd)
		j.fd = -1
	}
	j.files.close()
	if err := j.killAll(); err != nil {
		return err
	}
	if err := rmdirRetry(j.dir); err != nil {
		return fmt.Errorf("removing cgroup %s: %w", j.dir, err)
	}
	return nil
}

// killAll kills every task of the jail and waits until its cgroup.procs
// lists none. With cgroup.kill (Linux 5.14) the kernel kills them all at
// once, stopped and newly forked ones included; before it, tasks are
// killed one by one until none is left.
func (j *v2Jail) killAll() error {
	procs := filepath.Join(j.dir, "cgroup.procs")
	if j.d.l.kill {
		if err := j.write("cgroup.kill", "1"); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("killing cgroup %s: %w", j.dir, err)
		}
	} else {
		for deadline := time.Now().Add(5 * time.Second); ; {
			killProcs(procs)
			if waitEmpty(procs, 10*time.Millisecond) == nil {
				break
			}
			if time.Now().After(deadline) {
				break
			}
		}
	}
	return waitEmpty(procs, 5*time.Second)
}
