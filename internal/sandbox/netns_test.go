package sandbox

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWritableMount: a writable mount takes the payload's writes to the
// host directory; a read-only one refuses them.
func TestWritableMount(t *testing.T) {
	m := needJail(t)
	// Sources under /tmp are not visible to init: use /var/tmp.
	parent, err := os.MkdirTemp("/var/tmp", "pyexec-writable-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	rw, ro := filepath.Join(parent, "rw"), filepath.Join(parent, "ro")
	for _, d := range []string{rw, ro} {
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	res := runPy(t, m, `
for d in ("/mnt/rw", "/mnt/ro"):
    try:
        open(d + "/out", "w").write("written")
        print(d, "ok")
    except OSError as e:
        print(d, "refused", e.errno)`, func(s *Spec) {
		s.Mounts = []Mount{{Source: rw, Target: "/mnt/rw", Writable: true}, {Source: ro, Target: "/mnt/ro"}}
	})
	printed("/mnt/rw ok", "/mnt/ro refused")(t, res)
	if b, err := os.ReadFile(filepath.Join(rw, "out")); err != nil || string(b) != "written" {
		t.Errorf("host side of the writable mount: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(ro, "out")); err == nil {
		t.Error("the read-only mount was written to")
	}
}

// TestWritableMountValidation: a writable mount may not shadow a system
// directory.
func TestWritableMountValidation(t *testing.T) {
	for _, target := range []string{"/usr", "/usr/local/lib", "/bin"} {
		t.Run(target, func(t *testing.T) {
			s := Spec{Argv: []string{"/bin/true"}, Mounts: []Mount{{Source: "/srv", Target: target, Writable: true}}}
			if err := s.Validate(); err == nil {
				t.Errorf("writable mount at %s accepted", target)
			}
		})
	}
}

// TestListenInside: a payload without network reaches a listener opened
// in its namespace, and the bytes arrive at the host side; a host
// loopback port stays out of its reach.
func TestListenInside(t *testing.T) {
	m := needJail(t)
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	j, err := m.Prepare(ctx, Base{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	l, err := j.ListenInside("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			got <- "accept: " + err.Error()
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- string(b)
	}()
	code := fmt.Sprintf(`import socket
s = socket.create_connection(("127.0.0.1", %d), timeout=5)
s.sendall(b"hello from the jail")
s.close()
try:
    socket.create_connection(("127.0.0.1", %d), timeout=2)
    print("host port reached")
except OSError:
    print("host port unreachable")`, l.Addr().(*net.TCPAddr).Port, host.Addr().(*net.TCPAddr).Port)
	res, err := j.Run(ctx, Spec{Argv: []string{python, "-c", code}, Env: []string{"PATH=/usr/bin"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	printed("host port unreachable")(t, res)
	if s := <-got; s != "hello from the jail" {
		t.Errorf("host side read %q", s)
	}
}

// TestListenInsideNeedsOwnNetns: a jail with network has its egress link
// for a way out, never a listener of the caller's.
func TestListenInsideNeedsOwnNetns(t *testing.T) {
	m := needJail(t)
	j, err := m.Prepare(context.Background(), Base{Network: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if l, err := j.ListenInside("tcp", "127.0.0.1:0"); err == nil {
		l.Close()
		t.Fatal("ListenInside succeeded in a jail with network")
	}
}
