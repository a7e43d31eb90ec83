package cgroups

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/cgroups/v3/cgroup1"
)

// TestSweepFindsPartlyRemovedJails: a server killed while it removed a
// jail's cgroup may have removed it from the memory hierarchy only; the
// next server's sweep still finds and removes the rest (cgroup v1).
func TestSweepFindsPartlyRemovedJails(t *testing.T) {
	needRoot(t)
	m, err := New(Config{Parent: testParent})
	if err != nil {
		t.Fatal(err)
	}
	v1, ok := m.d.(*cgroupV1)
	if !ok {
		t.Skip("cgroup v1 only: a v2 jail is one directory")
	}
	var left []string
	for _, c := range []cgroup1.Name{cgroup1.Cpu, cgroup1.Pids} {
		dir := filepath.Join(v1.mounts[c], v1.base[c], "sweepv1-partly-removed")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		left = append(left, dir)
	}
	n, err := m.Sweep("sweepv1-")
	if err != nil || n != 1 {
		t.Fatalf("sweep removed %d jails (err %v), want the one left in cpu and pids", n, err)
	}
	for _, dir := range left {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s is still there after the sweep (%v)", dir, err)
		}
	}
}
