//go:build linux

package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/testserver"
)

// TestDoctorProbesTheCgroupParent: doctor builds its probe cgroup where
// serve would put its jails, under --cgroup-parent or
// PYEXEC_CGROUP_PARENT, says where, and refuses a parent serve refuses.
func TestDoctorProbesTheCgroupParent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the probe creates a cgroup")
	}
	for _, how := range []string{"flag", "variable"} {
		t.Run(how, func(t *testing.T) {
			parent := fmt.Sprintf("pyexec-doctor-%s-%d", how, os.Getpid())
			t.Cleanup(func() { _ = testserver.RemoveCgroups(parent) })
			args := []string{"--data-dir", t.TempDir()}
			if how == "flag" {
				args = append(args, "--cgroup-parent", parent)
			} else {
				t.Setenv("PYEXEC_CGROUP_PARENT", parent)
			}
			checks, _ := doctorJSON(t, args...)
			if c := checks["cgroups"]; !c.OK || !strings.Contains(c.Detail, "/"+parent) {
				t.Errorf("cgroups check %+v, want it ok and under %s", c, parent)
			}
		})
	}
	code, _, stderr := runCLI("doctor", "--cgroup-parent", "../escape")
	if code != 2 || !strings.Contains(stderr, "PYEXEC_CGROUP_PARENT") {
		t.Errorf("a parent outside the server's cgroup: exit %d, %s; want 2 naming the setting", code, stderr)
	}
}
