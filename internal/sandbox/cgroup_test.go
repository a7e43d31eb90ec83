package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/cgroups/v3"
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
		if _, err := newCgroupDriver(parent); err != nil {
			t.Fatalf("cgroup setup: %v", err)
		}
		b, err := os.ReadFile("/proc/self/cgroup")
		if err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString(cgroupAfterSetup + strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", " ") + "\n")
		return
	}
	needJail(t)
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
