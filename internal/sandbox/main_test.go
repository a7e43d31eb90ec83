package sandbox

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// TestMain lets the test binary serve as the jail's init, as the pyexec
// binary does: the parent re-executes /proc/self/exe with InitArg. After
// the suite it asserts that no jail left a process, a cgroup, a mount or a
// temp directory behind.
func TestMain(m *testing.M) {
	if IsInit() {
		os.Exit(Init())
	}
	mountsBefore, _ := os.ReadFile("/proc/self/mountinfo")
	code := m.Run()
	// Jails are removed in the background (Manager.Release): give the
	// last ones a moment.
	left := leftovers()
	for deadline := time.Now().Add(10 * time.Second); len(left) > 0 && time.Now().Before(deadline); left = leftovers() {
		time.Sleep(50 * time.Millisecond)
	}
	if mountsAfter, _ := os.ReadFile("/proc/self/mountinfo"); string(mountsAfter) != string(mountsBefore) {
		left = append(left, "host mount table changed during the suite")
	}
	if len(left) > 0 {
		fmt.Fprintln(os.Stderr, "FAIL: jails left things behind:")
		for _, l := range left {
			fmt.Fprintln(os.Stderr, "  "+l)
		}
		code = 1
	}
	removeTestParents()
	os.Exit(code)
}
