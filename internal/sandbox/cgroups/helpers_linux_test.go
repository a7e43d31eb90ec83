package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testParent is the cgroup parent of this test binary's cgroups, so that
// the leftover check sees only them: other packages' tests make jails in
// parallel under the default parent.
var testParent = fmt.Sprintf("pyexec-test-%d", os.Getpid())

// needRoot skips a test that makes real cgroups, with the reason.
func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates cgroups (CI runs as root)")
	}
}

// defaultLimits are the limits a jail gets when a request sets none
// (sandbox.DefaultLimits), for tests that need some.
func defaultLimits() Limits { return Limits{MemoryBytes: 512 << 20, Pids: 128, CPUs: 1} }

// TestMain asserts, after the suite, that no test left a cgroup below
// this binary's parent, and removes the (empty) parents.
func TestMain(m *testing.M) {
	code := m.Run()
	parents := testParents()
	var left []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		left = left[:0]
		for _, p := range parents {
			entries, _ := os.ReadDir(p)
			for _, e := range entries {
				if e.IsDir() {
					left = append(left, filepath.Join(p, e.Name()))
				}
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		fmt.Fprintln(os.Stderr, "FAIL: cgroups left behind:")
		for _, l := range left {
			fmt.Fprintln(os.Stderr, "  "+l)
		}
		code = 1
	}
	for _, p := range parents {
		_ = os.Remove(p)
	}
	os.Exit(code)
}

// testParents lists the directories of this binary's cgroup parent in
// every hierarchy.
func testParents() []string {
	var dirs []string
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == testParent {
			dirs = append(dirs, p)
			return filepath.SkipDir
		}
		return nil
	})
	return dirs
}
