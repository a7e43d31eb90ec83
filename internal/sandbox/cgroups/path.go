package cgroups

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
)

// serverLeaf is the cgroup the server moves itself (and whatever else ran
// in its own cgroup) into on cgroup v2, beside the jails' parent:
//
//	<service>/            the delegated cgroup: cpu memory pids enabled
//	├── server/           the server's processes (the leaf)
//	└── <parent>/         e.g. "pyexec": cpu memory pids enabled
//	    └── <jail id>/    one per jail, limits set, no children
//
// systemd's DelegateSubgroup=server starts the service in this leaf
// directly.
const serverLeaf = "server"

// ownCgroupV2 returns the unified-hierarchy path in a /proc/<pid>/cgroup
// file: the "0::<path>" line. Inside a cgroup namespace the path is
// relative to the namespace's root, so a container reads "0::/".
func ownCgroupV2(procCgroup []byte) (string, error) {
	sc := bufio.NewScanner(bytes.NewReader(procCgroup))
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			switch {
			case !strings.HasPrefix(p, "/"):
				return "", fmt.Errorf("unexpected cgroup v2 path %q", p)
			case hasDotDot(p):
				// Moved out of its cgroup namespace's subtree after the
				// namespace was made: the cgroup is not reachable by name.
				return "", fmt.Errorf("this process's cgroup %s lies outside its cgroup namespace", p)
			}
			return path.Clean(p), nil
		}
	}
	return "", errors.New("no cgroup v2 entry (0::) in /proc/self/cgroup")
}

// cgroupInMount turns a cgroup path as /proc/self/cgroup names it into a
// path below the cgroup2 mount whose root (the fourth mountinfo field) is
// mountRoot. A mount made outside the process's cgroup namespace shows a
// root like "/../.." and does not contain the process's cgroup by name.
func cgroupInMount(mountRoot, own string) (string, error) {
	if mountRoot == "/" {
		return own, nil
	}
	if hasDotDot(mountRoot) {
		return "", fmt.Errorf("the cgroup2 mount shows %s of the hierarchy, outside this process's cgroup namespace: mount cgroup2 again from inside the namespace", mountRoot)
	}
	if own == mountRoot {
		return "/", nil
	}
	rel, ok := strings.CutPrefix(own, mountRoot+"/")
	if !ok {
		return "", fmt.Errorf("this process's cgroup %s is not below the cgroup2 mount's root %s", own, mountRoot)
	}
	return "/" + rel, nil
}

// hasDotDot reports whether a cgroup path climbs to a parent: how the
// kernel names a cgroup outside the reader's cgroup namespace.
func hasDotDot(p string) bool {
	return slices.Contains(strings.Split(p, "/"), "..")
}

// serverLayout decides where the server's delegated cgroup is and which
// leaf its processes live in, given its own cgroup (relative to the mount)
// and whether that is the hierarchy's real root, which alone may hold
// processes and enable controllers for its children (the "no internal
// processes" rule); there leaf is empty. A server already in the leaf —
// restarted by a supervisor that was moved along, started there by
// systemd, or set up twice in one process — stays there: the layout never
// nests.
func serverLayout(own string, isRoot bool) (service, leaf string) {
	switch {
	case isRoot:
		return own, ""
	case path.Base(own) == serverLeaf:
		return path.Dir(own), own
	default:
		return own, path.Join(own, serverLeaf)
	}
}

// checkCgroupParent refuses a jails' parent that could leave the service
// cgroup or be the server's leaf.
func checkCgroupParent(parent string) error {
	if parent == "" || parent == "." || path.IsAbs(parent) || path.Clean(parent) != parent || strings.HasPrefix(parent, "..") {
		return fmt.Errorf("%w: cgroup parent %q must be a relative path below the server's cgroup", ErrInvalidParent, parent)
	}
	if strings.Split(parent, "/")[0] == serverLeaf {
		return fmt.Errorf("%w: cgroup parent %q would be the server's own leaf cgroup", ErrInvalidParent, parent)
	}
	return nil
}

// mountRoot returns, for the mount of fstype at mountpoint in a
// /proc/self/mountinfo file, its root within the filesystem; the last such
// mount wins, as the last one mounted hides the others.
func mountRoot(mountinfo []byte, mountpoint, fstype string) (string, bool) {
	root, found := "", false
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, f := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(f) < 1 || f[0] != fstype || pf[4] != mountpoint {
			continue
		}
		root, found = pf[3], true
	}
	return root, found
}
