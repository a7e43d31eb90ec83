package cgroups

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/cgroups/v3"
	"golang.org/x/sys/unix"
)

// cgroupSetupEnv makes the test binary, re-executed by
// TestJailCgroupSetupNeverNests, set up the jails' cgroup parent named by
// its value and print its own cgroups afterwards.
const cgroupSetupEnv = "PYEXEC_TEST_CGROUP_SETUP"

const cgroupAfterSetup = "cgroups after setup: "

// TestJailCgroupSetupNeverNests: ten servers started one after the other
// from the same place (a supervisor restarting its child) each set up the
// jails' cgroups, and each ends in the same cgroup: on cgroup v2 the
// server moves into its leaf once, never into a leaf of its leaf.
func TestJailCgroupSetupNeverNests(t *testing.T) {
	if parent := os.Getenv(cgroupSetupEnv); parent != "" {
		if _, err := newDriver(parent); err != nil {
			t.Fatalf("cgroup setup: %v", err)
		}
		b, err := os.ReadFile("/proc/self/cgroup")
		if err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString(cgroupAfterSetup + strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", " ") + "\n")
		return
	}
	needRoot(t)
	var first string
	for i := range 10 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestJailCgroupSetupNeverNests$", "-test.count=1")
		cmd.Env = append(os.Environ(), cgroupSetupEnv+"="+testParent)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("start %d: %v\n%s", i+1, err, out)
		}
		var got string
		for _, line := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(line, cgroupAfterSetup); ok {
				got = v
			}
		}
		if got == "" {
			t.Fatalf("start %d printed no cgroups:\n%s", i+1, out)
		}
		if strings.Contains(got, "/"+serverLeaf+"/"+serverLeaf) {
			t.Fatalf("start %d nested the server's leaf: %s", i+1, got)
		}
		if i == 0 {
			first = got
		} else if got != first {
			t.Fatalf("start %d ended in %s, the first in %s", i+1, got, first)
		}
	}
	if cgroups.Mode() == cgroups.Unified {
		// The jails' parent is beside the leaf, one level below the
		// service cgroup.
		own, err := ownCgroupV2([]byte(strings.ReplaceAll(first, " ", "\n")))
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(own) != serverLeaf {
			t.Fatalf("the server is in %s, not in its leaf", own)
		}
		if _, err := os.Stat(filepath.Join(v2Mount, filepath.Dir(own), testParent)); err != nil {
			t.Fatalf("the jails' parent is not beside the leaf: %v", err)
		}
	}
	t.Logf("every start ended in %s", first)
}

// testOwnCgroupV2 is the cgroup v2 path of the test binary itself.
func testOwnCgroupV2(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	own, err := ownCgroupV2(b)
	if err != nil {
		t.Fatal(err)
	}
	return own
}

// removeCgroupTree removes a cgroup and its children, deepest first,
// once their processes are gone.
func removeCgroupTree(t *testing.T, dir string) {
	t.Helper()
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		killProcs(filepath.Join(dirs[i], "cgroup.procs"))
		_ = waitEmpty(filepath.Join(dirs[i], "cgroup.procs"), 5*time.Second)
		if err := rmdirRetry(dirs[i]); err != nil {
			t.Errorf("removing %s: %v", dirs[i], err)
		}
	}
}

// TestCgroupSetupWithoutDelegationNamesTheFix: a server in a cgroup v2
// whose parent hands it no controllers refuses to start, and says which
// controllers are missing and the command or unit setting that delegates
// them.
func TestCgroupSetupWithoutDelegationNamesTheFix(t *testing.T) {
	needRoot(t)
	if cgroups.Mode() != cgroups.Unified {
		t.Skip("needs cgroup v2: delegation is a cgroup v2 notion")
	}
	own := testOwnCgroupV2(t)
	// <service>/<x>/inner: x enables nothing for inner.
	x := filepath.Join(v2Mount, filepath.Dir(own), testParent+"-undelegated")
	inner := filepath.Join(x, "inner")
	if err := os.MkdirAll(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	defer removeCgroupTree(t, x)
	fd, err := unix.Open(inner, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	cmd := exec.Command(os.Args[0], "-test.run=^TestJailCgroupSetupNeverNests$", "-test.count=1")
	cmd.Env = append(os.Environ(), cgroupSetupEnv+"="+testParent)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("set up without delegated controllers:\n%s", out)
	}
	for _, want := range []string{
		"controllers cpu, memory, pids are not delegated",
		"Delegate=yes",
		"echo '+cpu +memory +pids' > " + x + "/cgroup.subtree_control",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}
	if entries, _ := os.ReadDir(inner); hasDir(entries) {
		t.Errorf("a refused setup created cgroups in %s", inner)
	}
}

// hasDir reports whether a directory listing has a directory.
func hasDir(entries []os.DirEntry) bool {
	for _, e := range entries {
		if e.IsDir() {
			return true
		}
	}
	return false
}
