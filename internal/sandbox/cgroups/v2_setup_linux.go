package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

const v2Mount = "/sys/fs/cgroup"

// v2Wanted are the controllers every jail is bounded by.
var v2Wanted = []string{"cpu", "memory", "pids"}

// v2Layout is where the server found itself on the unified hierarchy and
// what it set up there (see serverLeaf for the tree). Paths are relative
// to v2Mount.
type v2Layout struct {
	own     string // the server's cgroup when it started
	service string // the delegated cgroup: holds the leaf and the jails' parent
	leaf    string // where the server's processes are; "" in the real root
	moved   int    // processes moved into the leaf by this setup
	base    string // <service>/<parent>: the jails' parent
	swap    bool   // memory.swap.max exists: swap can be capped
	kill    bool   // cgroup.kill exists (Linux 5.14)
}

// setupV2 finds the server's own cgroup, moves the server into its leaf
// once and enables the jails' controllers down to <service>/<parent>.
// Every failure names what the operator must delegate.
func setupV2(parent string) (*v2Layout, error) {
	if err := checkCgroupParent(parent); err != nil {
		return nil, err
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("reading own cgroup: %w", err)
	}
	inNS, err := ownCgroupV2(b)
	if err != nil {
		return nil, err
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	root, ok := mountRoot(mi, v2Mount, "cgroup2")
	if !ok {
		return nil, fmt.Errorf("%w: cgroup2 is not mounted at %s", ErrUnsupported, v2Mount)
	}
	own, err := cgroupInMount(root, inNS)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	l := &v2Layout{own: own}
	l.service, l.leaf = serverLayout(own, isRootCgroup(own))
	fail := func(err error) (*v2Layout, error) {
		return nil, fmt.Errorf("%w: cgroup v2, server in %s: %v", ErrUnsupported, own, err)
	}
	if err := l.checkAvailable(l.service); err != nil {
		return fail(err)
	}
	if l.leaf != "" && !isRootCgroup(l.service) {
		if err := l.emptyIntoLeaf(); err != nil {
			return fail(err)
		}
	}
	if err := enableControllers(l.service); err != nil {
		return fail(err)
	}
	dir := l.service
	for _, name := range strings.Split(parent, "/") {
		dir = path.Join(dir, name)
		if err := os.Mkdir(filepath.Join(v2Mount, dir), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fail(fmt.Errorf("creating the jails' parent: %w%s", err, fixWritable(l.service)))
		}
		if err := enableControllers(dir); err != nil {
			return fail(err)
		}
	}
	l.base = dir
	l.swap = exists(filepath.Join(v2Mount, l.base, "memory.swap.max"))
	l.kill = exists(filepath.Join(v2Mount, l.base, "cgroup.kill"))
	return l, nil
}

// isRootCgroup reports whether group is the hierarchy's real root: only
// the root has no cgroup.type. The root of a cgroup namespace is not it.
func isRootCgroup(group string) bool {
	_, err := os.Stat(filepath.Join(v2Mount, group, "cgroup.type"))
	return errors.Is(err, os.ErrNotExist)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// readFields reads a whitespace-separated list file of a cgroup.
func readFields(group, file string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(v2Mount, group, file))
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(b)), nil
}

// checkAvailable fails when the service cgroup's parent does not hand it
// every controller a jail needs.
func (l *v2Layout) checkAvailable(group string) error {
	have, err := readFields(group, "cgroup.controllers")
	if err != nil {
		return fmt.Errorf("reading the controllers of %s: %w", group, err)
	}
	var missing []string
	for _, c := range v2Wanted {
		if !slices.Contains(have, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	fix := fmt.Sprintf("echo '+%s' > %s/cgroup.subtree_control", strings.Join(missing, " +"), filepath.Join(v2Mount, path.Dir(group)))
	if group == "/" {
		fix = "the container runtime must enable them for the container's cgroup (Docker and Kubernetes do on a cgroup v2 host)"
	}
	return fmt.Errorf("controllers %s are not delegated to %s (it has %q). Fix: in a systemd unit Delegate=yes "+
		"(a user service also needs them delegated to user@.service: a drop-in with [Service] Delegate=cpu memory pids); "+
		"by hand: %s", strings.Join(missing, ", "), group, strings.Join(have, " "), fix)
}

// emptyIntoLeaf moves every process of the service cgroup, the server
// among them, into the leaf: a cgroup that holds processes cannot enable
// controllers for its children. Processes that a supervisor starts while
// this runs are moved too.
func (l *v2Layout) emptyIntoLeaf() error {
	leafDir := filepath.Join(v2Mount, l.leaf)
	if err := os.Mkdir(leafDir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("creating the server's leaf cgroup: %w%s", err, fixWritable(l.service))
	}
	for range 20 {
		pids, err := readFields(l.service, "cgroup.procs")
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			err := os.WriteFile(filepath.Join(leafDir, "cgroup.procs"), []byte(pid), 0)
			switch {
			case err == nil:
				l.moved++
			case errors.Is(err, unix.ESRCH):
			default:
				return fmt.Errorf("moving process %s from %s into the leaf %s: %w%s", pid, l.service, l.leaf, err, fixWritable(l.service))
			}
		}
	}
	return fmt.Errorf("processes keep appearing in %s while the server moves them into %s", l.service, l.leaf)
}

// enableControllers turns on in group's cgroup.subtree_control every
// controller jails need that is not on yet (an operator may have enabled
// them already and not let the server write there).
func enableControllers(group string) error {
	on, err := readFields(group, "cgroup.subtree_control")
	if err != nil {
		return fmt.Errorf("reading %s: %w", filepath.Join(group, "cgroup.subtree_control"), err)
	}
	for _, c := range v2Wanted {
		if slices.Contains(on, c) {
			continue
		}
		err := os.WriteFile(filepath.Join(v2Mount, group, "cgroup.subtree_control"), []byte("+"+c), 0)
		switch {
		case err == nil:
		case errors.Is(err, unix.EBUSY):
			return fmt.Errorf("enabling %s in %s: %w: it holds processes the server did not move "+
				"(cgroup v2 lets only a cgroup without processes enable controllers for children)", c, group, err)
		default:
			return fmt.Errorf("enabling %s in %s: %w%s", c, group, err, fixWritable(group))
		}
	}
	return nil
}

// fixWritable explains, after an error writing in group, how an operator
// gives the server its cgroup.
func fixWritable(group string) string {
	return fmt.Sprintf(". Fix: give the server its cgroup %s to write: in a systemd unit Delegate=yes "+
		"(it also chowns the cgroup to the unit's User=); in a container --cgroupns=private and a read-write %s "+
		"(docker run --privileged, or remount it rw); or by hand: chown -R %d %s",
		group, v2Mount, os.Geteuid(), filepath.Join(v2Mount, group))
}

// describe says what setupV2 found and did, for doctor.
func (l *v2Layout) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cgroup v2; server's cgroup %s", l.own)
	switch {
	case l.leaf == "":
		b.WriteString(" (the root: no leaf needed)")
	case l.moved > 0:
		fmt.Fprintf(&b, "; moved %d process(es) into the leaf %s", l.moved, l.leaf)
	default:
		fmt.Fprintf(&b, "; leaf %s", l.leaf)
	}
	fmt.Fprintf(&b, "; delegated %s writable by uid %d; %s enabled down to the jails' parent %s",
		l.service, os.Geteuid(), strings.Join(v2Wanted, " "), l.base)
	if l.swap {
		b.WriteString("; swap capped (memory.swap.max=0)")
	} else {
		b.WriteString("; no swap accounting: swap is not capped")
	}
	if !l.kill {
		b.WriteString("; no cgroup.kill (Linux < 5.14): jails are removed by killing their processes")
	}
	return b.String()
}
