package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/cgroups/v3"
	"golang.org/x/sys/unix"
)

// rootlessEnv makes the test binary, re-executed by
// TestUnprivilegedServerWithDelegatedCgroup as an unprivileged user, run
// a memory bomb under a cgroup limit and print the outcome.
const rootlessEnv = "PYEXEC_TEST_ROOTLESS_CGROUP"

// TestUnprivilegedServerWithDelegatedCgroup: a server that is not root,
// given a cgroup v2 subtree as systemd's Delegate=yes gives it (the
// directory and its cgroup.procs, cgroup.subtree_control and
// cgroup.threads owned by the server's uid), moves itself into its leaf,
// confines its jails (in user namespaces) with cgroup limits and removes
// their cgroups.
func TestUnprivilegedServerWithDelegatedCgroup(t *testing.T) {
	if parent := os.Getenv(rootlessEnv); parent != "" {
		m, err := New(Config{CgroupParent: parent})
		if err != nil {
			t.Fatal(err)
		}
		r, err := m.Run(context.Background(), Spec{Argv: []string{python, "-c", "x = bytearray(200 << 20)\nprint('allocated')"},
			Limits: Limits{MemoryBytes: 64 << 20, WallTime: time.Minute}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		m.Wait()
		os.Stdout.WriteString("outcome: " + string(r.Status) + " uid " + strconv.Itoa(os.Geteuid()) + "\n")
		return
	}
	needJail(t)
	if cgroups.Mode() != cgroups.Unified {
		t.Skip("needs cgroup v2: a v1 hierarchy cannot be delegated to an unprivileged user safely")
	}
	own := ownCgroupV2(t)
	// A sibling of this binary's leaf, delegated to nobody.
	delegated := filepath.Join("/sys/fs/cgroup", filepath.Dir(own), testParent+"-rootless")
	if err := os.Mkdir(delegated, 0o755); err != nil {
		t.Fatal(err)
	}
	defer removeDelegated(t, delegated)
	for _, p := range []string{"", "cgroup.procs", "cgroup.subtree_control", "cgroup.threads"} {
		if err := os.Chown(filepath.Join(delegated, p), 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	fd, err := unix.Open(delegated, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	cmd := commandAsNobody(t, "TestUnprivilegedServerWithDelegatedCgroup", rootlessEnv+"=pyexec")
	cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "outcome: oom uid 65534") {
		t.Fatalf("a memory bomb in a rootless server's jail was not stopped by its cgroup:\n%s", out)
	}
	entries, err := os.ReadDir(filepath.Join(delegated, "pyexec"))
	if err != nil {
		t.Fatalf("no jails' parent in the delegated cgroup: %v", err)
	}
	for _, e := range entries {
		if e.IsDir() {
			t.Errorf("jail cgroup left: %s", e.Name())
		}
	}
	// The leaf is "server" (systemd's DelegateSubgroup=server starts a
	// service there directly; see docs/deploy.md).
	if _, err := os.Stat(filepath.Join(delegated, "server")); err != nil {
		t.Fatalf("the server did not move into its leaf: %v", err)
	}
}

// ownCgroupV2 is the cgroup v2 path of the test binary itself.
func ownCgroupV2(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	t.Fatalf("no cgroup v2 entry in /proc/self/cgroup:\n%s", b)
	return ""
}

// removeDelegated kills whatever is left in the cgroup tree dir
// (cgroup.kill, Linux 5.14) and removes it, deepest first.
func removeDelegated(t *testing.T, dir string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil {
		t.Errorf("killing what is left in %s: %v", dir, err)
	}
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		err := os.Remove(dirs[i])
		// Killed tasks leave their cgroup a moment after the signal.
		for deadline := time.Now().Add(5 * time.Second); errors.Is(err, unix.EBUSY) && time.Now().Before(deadline); err = os.Remove(dirs[i]) {
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil {
			t.Errorf("removing %s: %v", dirs[i], err)
		}
	}
}
