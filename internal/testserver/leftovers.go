package testserver

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// cgroupRoot is where every cgroup hierarchy (v1) or the v2 tree is
// mounted.
const cgroupRoot = "/sys/fs/cgroup"

// CgroupDirsNamed lists the directories called name in every cgroup
// hierarchy (v1) or the v2 tree, not looking below a match.
func CgroupDirsNamed(name string) []string {
	var dirs []string
	_ = filepath.WalkDir(cgroupRoot, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == name {
			dirs = append(dirs, p)
			return filepath.SkipDir
		}
		return nil
	})
	return dirs
}

// JailCgroups lists the cgroups directly below the cgroup parent, in any
// hierarchy: the jails a server left.
func JailCgroups(parent string) []string {
	var left []string
	for _, d := range CgroupDirsNamed(parent) {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if e.IsDir() {
				left = append(left, filepath.Join(d, e.Name()))
			}
		}
	}
	return left
}

// RemoveCgroups removes the cgroup parent's directories in every
// hierarchy, deepest first. A cgroup that still holds a process stays
// (rmdir refuses it); the error names the first such one.
func RemoveCgroups(parent string) error {
	var errs []error
	for _, top := range CgroupDirsNamed(parent) {
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// Process is one host process, as /proc shows it.
type Process struct {
	Pid     int
	Comm    string // its name (children inherit it)
	Cmdline string // its arguments, joined by spaces
	Cgroup  string // /proc/<pid>/cgroup
}

func (p Process) String() string { return fmt.Sprintf("%d %s", p.Pid, p.Cmdline) }

// Processes lists the host processes for which match holds.
func Processes(match func(Process) bool) []Process {
	var found []Process
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		cg, err := os.ReadFile(filepath.Join(dir, "cgroup"))
		if err != nil {
			continue // gone meanwhile
		}
		comm, _ := os.ReadFile(filepath.Join(dir, "comm"))
		cmd, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		p := Process{Pid: pid, Comm: strings.TrimSpace(string(comm)), Cgroup: string(cg),
			Cmdline: strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))}
		if match(p) {
			found = append(found, p)
		}
	}
	return found
}

// InCgroup matches the processes in a cgroup below the cgroup parent (a
// jail's), in any hierarchy.
func InCgroup(parent string) func(Process) bool {
	return func(p Process) bool { return strings.Contains(p.Cgroup, "/"+parent+"/") }
}

// Leftovers is what a run left below its cgroup parent: processes and
// jail cgroups, one line each; empty when nothing is left.
func Leftovers(parent string) []string {
	var left []string
	for _, p := range Processes(InCgroup(parent)) {
		left = append(left, "process "+p.String())
	}
	for _, c := range JailCgroups(parent) {
		left = append(left, "cgroup "+c)
	}
	return left
}

// ProcStatusBytes reads a field given in kB (VmRSS, VmHWM...) of
// /proc/<pid>/status, in bytes.
func ProcStatusBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no " + field + " in /proc/" + strconv.Itoa(pid) + "/status")
}
