package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// testCgroupParent is the cgroup parent of this test binary's jails.
var testCgroupParent = fmt.Sprintf("pyexec-test-%d", os.Getpid())

// TestMain lets the test binary serve as the jail's init (jail_linux_test.go
// runs real jails) and removes its jails' cgroup parent after the suite.
func TestMain(m *testing.M) {
	if sandbox.IsInit() {
		os.Exit(sandbox.Init())
	}
	code := m.Run()
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == testCgroupParent {
			_ = os.Remove(p)
			return filepath.SkipDir
		}
		return nil
	})
	os.Exit(code)
}
