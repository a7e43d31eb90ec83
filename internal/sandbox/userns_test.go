package sandbox

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestUnprivilegedServerUsesAUserNamespace: a server that is not root gets
// its jails in a new user namespace; the payload is uid 0 there, mapped to
// the server's own uid, with no capabilities, no_new_privs and seccomp, in
// a cgroup namespace rooted at its own cgroup.
// The test runs a copy of this test binary as uid 65534 (cgroups are not
// writable there, so they are switched off explicitly, as an operator
// would have to).
func TestUnprivilegedServerUsesAUserNamespace(t *testing.T) {
	if os.Getenv("PYEXEC_TEST_AS_NOBODY") == "1" {
		m, err := New(Config{Disable: Layers{NoCgroups: true}})
		if err != nil {
			t.Fatal(err)
		}
		r, err := m.Run(context.Background(), Spec{Argv: []string{python, "-c", `import os
st = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
print("uid", os.getuid(), "CapEff", st["CapEff"].strip(), "CapBnd", st["CapBnd"].strip(), "NoNewPrivs", st["NoNewPrivs"].strip(), "Seccomp", st["Seccomp"].strip())
print("cgroup", sorted(set(l.strip().split(":", 2)[2] for l in open("/proc/self/cgroup") if l.strip())))
try:
    open("/etc/evil", "w")
except OSError:
    print("readonly")`}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		os.Stdout.Write(r.Stdout)
		os.Stdout.Write(r.Stderr)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to start the test binary as another user")
	}
	cmd := commandAsNobody(t, "TestUnprivilegedServerUsesAUserNamespace", "PYEXEC_TEST_AS_NOBODY=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := "uid 0 CapEff 0000000000000000 CapBnd 0000000000000000 NoNewPrivs 1 Seccomp 2\ncgroup ['/']\nreadonly\n"
	if !strings.Contains(string(out), want) {
		t.Fatalf("output lacks %q:\n%s", want, out)
	}
}

// TestUnprivilegedServerHandsFilesToAWarmPayload: a server without root
// hands a warm payload its request's files (written from the host into
// the jail's workspace), and the payload owns them. Giving them the
// sandbox user's ids from outside the jail's user namespace was refused,
// so every warm hand-off of a rootless server failed and ran cold.
func TestUnprivilegedServerHandsFilesToAWarmPayload(t *testing.T) {
	if os.Getenv("PYEXEC_TEST_AS_NOBODY") == "1" {
		// The sandbox user is not the server's own (nobody here), as
		// with a rootless server of its own account and the default ids.
		m, err := New(Config{UID: 1000, GID: 1000, Disable: Layers{NoCgroups: true}})
		if err != nil {
			t.Fatal(err)
		}
		r := runWarm(t, m, `import os
st = os.stat("pkg/data.txt")
print(open("pkg/data.txt").read(), st.st_uid == os.getuid(), oct(st.st_mode & 0o777))
open("pkg/data.txt", "a").write("more")
`, withFiles(File{Path: "pkg/data.txt", Data: []byte("handed"), Mode: 0o600}))
		os.Stdout.Write(r.Stdout)
		os.Stdout.Write(r.Stderr)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to start the test binary as another user")
	}
	out, err := commandAsNobody(t, "TestUnprivilegedServerHandsFilesToAWarmPayload", "PYEXEC_TEST_AS_NOBODY=1").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if want := "handed True 0o600\n"; !strings.Contains(string(out), want) {
		t.Fatalf("output lacks %q:\n%s", want, out)
	}
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// commandAsNobody is this test binary, copied where uid 65534 can run it,
// set to run the one test named as that uid with env (and PATH) only.
func commandAsNobody(t *testing.T, test string, env ...string) *exec.Cmd {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "pyexec-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	bin := filepath.Join(dir, "sandbox.test")
	if err := copyFile(self, bin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^"+test+"$", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(env, "PATH=/usr/bin:/bin")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	return cmd
}
