package cgroups

import (
	"errors"
	"testing"
)

func TestOwnCgroupV2(t *testing.T) {
	for _, c := range []struct {
		name, file, want string
		fails            bool
	}{
		{"systemd service", "0::/system.slice/pyexec.service\n", "/system.slice/pyexec.service", false},
		{"container's cgroup namespace", "0::/\n", "/", false},
		{"already in the leaf", "0::/system.slice/pyexec.service/server\n", "/system.slice/pyexec.service/server", false},
		{"hybrid host", "12:memory:/user.slice\n4:pids:/user.slice\n0::/user.slice/session-1.scope\n", "/user.slice/session-1.scope", false},
		{"outside the namespace's root", "0::/../sibling\n", "", true},
		{"a name starting with dots", "0::/system.slice/..x\n", "/system.slice/..x", false},
		{"v1 only", "12:memory:/x\n4:pids:/x\n", "", true},
		{"relative path", "0::x\n", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ownCgroupV2([]byte(c.file))
			if (err != nil) != c.fails || got != c.want {
				t.Fatalf("ownCgroupV2(%q) = %q, %v; want %q (error: %v)", c.file, got, err, c.want, c.fails)
			}
		})
	}
}

func TestCgroupInMount(t *testing.T) {
	for _, c := range []struct {
		name, root, own, want string
		fails                 bool
	}{
		{"host mount", "/", "/system.slice/a.service", "/system.slice/a.service", false},
		{"namespace with its own mount", "/", "/", "/", false},
		{"bind of a subtree", "/system.slice", "/system.slice/a.service", "/a.service", false},
		{"the subtree itself", "/system.slice", "/system.slice", "/", false},
		{"mount from outside the namespace", "/../..", "/", "", true},
		{"cgroup outside the mount", "/system.slice", "/user.slice/x", "", true},
		{"a sibling with the same prefix", "/system.slice", "/system.slice2/x", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := cgroupInMount(c.root, c.own)
			if (err != nil) != c.fails || got != c.want {
				t.Fatalf("cgroupInMount(%q, %q) = %q, %v; want %q (error: %v)", c.root, c.own, got, err, c.want, c.fails)
			}
		})
	}
}

// TestServerLayout: the server moves into a leaf of its own cgroup once;
// a server found in that leaf stays there, so restarts never nest.
func TestServerLayout(t *testing.T) {
	for _, c := range []struct {
		name          string
		own           string
		root          bool
		service, leaf string
	}{
		{"systemd service", "/system.slice/p.service", false, "/system.slice/p.service", "/system.slice/p.service/server"},
		{"restart in the leaf", "/system.slice/p.service/server", false, "/system.slice/p.service", "/system.slice/p.service/server"},
		{"container's namespace root", "/", false, "/", "/server"},
		{"container restart in the leaf", "/server", false, "/", "/server"},
		{"the real root", "/", true, "/", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			service, leaf := serverLayout(c.own, c.root)
			if service != c.service || leaf != c.leaf {
				t.Fatalf("serverLayout(%q, %v) = %q, %q; want %q, %q", c.own, c.root, service, leaf, c.service, c.leaf)
			}
			// Set up again from where the first setup put the server:
			// the same place.
			if leaf != "" {
				if s2, l2 := serverLayout(leaf, false); s2 != service || l2 != leaf {
					t.Fatalf("a second setup from %q moves to %q, %q", leaf, s2, l2)
				}
			}
		})
	}
}

func TestCheckCgroupParent(t *testing.T) {
	for _, p := range []string{"pyexec", "a/b", "pyexec-test-1"} {
		if err := checkCgroupParent(p); err != nil {
			t.Errorf("%q refused: %v", p, err)
		}
	}
	for _, p := range []string{"", ".", "/abs", "../up", "a/../../b", "a//b", "server", "server/x"} {
		if err := checkCgroupParent(p); !errors.Is(err, ErrInvalidParent) {
			t.Errorf("%q accepted (%v)", p, err)
		}
	}
}

func TestMountRoot(t *testing.T) {
	mi := `24 1 0:22 / /sys rw,nosuid shared:7 - sysfs sysfs rw
30 24 0:26 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755
35 30 0:31 / /sys/fs/cgroup/memory rw shared:14 - cgroup cgroup rw,memory
41 24 0:40 /../.. /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate
`
	if root, ok := mountRoot([]byte(mi), "/sys/fs/cgroup", "cgroup2"); !ok || root != "/../.." {
		t.Fatalf("mountRoot = %q, %v", root, ok)
	}
	if _, ok := mountRoot([]byte(mi), "/sys/fs/cgroup/unified", "cgroup2"); ok {
		t.Fatal("found a mount that is not there")
	}
}
