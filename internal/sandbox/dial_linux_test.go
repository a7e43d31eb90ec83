package sandbox

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// listenerPayload listens on 127.0.0.1:8000 and, where the jail has IPv6,
// on [::1]:8001, answers each connection "pong:" + what it read, and
// prints "ready v6=<bool>" once both listen.
const listenerPayload = `
import socket, threading, sys
def serve(s):
    while True:
        c, _ = s.accept()
        data = c.recv(100)
        c.sendall(b"pong:" + data)
        c.close()
a = socket.socket(); a.bind(("127.0.0.1", 8000)); a.listen()
threading.Thread(target=serve, args=(a,), daemon=True).start()
v6 = True
try:
    b = socket.socket(socket.AF_INET6); b.bind(("::1", 8001)); b.listen()
    threading.Thread(target=serve, args=(b,), daemon=True).start()
except OSError:
    v6 = False
print("ready v6=%s" % v6, flush=True)
threading.Event().wait()
`

// TestDialInside: the server reaches a port the payload listens on inside
// its jail (no network, only its loopback), on 127.0.0.1 and on ::1; a
// port nobody listens on there is refused, even one the host listens on
// (the dial never lands on the host's loopback); once the jail is gone,
// nothing is dialled at all.
func TestDialInside(t *testing.T) {
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
	ready := make(chan string, 1)
	var once sync.Once
	pr, pw := io.Pipe()
	go func() {
		line, _ := bufio.NewReader(pr).ReadString('\n')
		once.Do(func() { ready <- strings.TrimSpace(line) })
		_, _ = io.Copy(io.Discard, pr)
	}()
	p, err := j.Start(ctx, Spec{Argv: []string{python, "-c", listenerPayload}, Env: testEnv,
		Limits: Limits{WallTime: time.Minute}}, func(s Stream, b []byte) {
		if s == Stdout {
			_, _ = pw.Write(b)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	var state string
	select {
	case state = <-ready:
	case <-p.Done():
		t.Fatalf("the payload ended: %+v", p.Wait())
	case <-ctx.Done():
		t.Fatal("the payload did not listen")
	}
	ping := func(port int) (string, error) {
		c, err := j.DialInside(ctx, port)
		if err != nil {
			return "", err
		}
		defer c.Close()
		if _, err := c.Write([]byte("ping")); err != nil {
			return "", err
		}
		b, err := io.ReadAll(c)
		return string(b), err
	}
	if got, err := ping(8000); err != nil || got != "pong:ping" {
		t.Errorf("127.0.0.1:8000: %q, %v", got, err)
	}
	if state == "ready v6=True" {
		if got, err := ping(8001); err != nil || got != "pong:ping" {
			t.Errorf("[::1]:8001: %q, %v", got, err)
		}
	} else {
		t.Logf("the jail has no IPv6 loopback (%s): ::1 not tried", state)
	}
	if _, err := ping(8002); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("a port nobody listens on: %v, want connection refused", err)
	}
	hostPort := host.Addr().(*net.TCPAddr).Port
	if _, err := ping(hostPort); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("the host's port %d: %v, want connection refused inside the jail", hostPort, err)
	}
	for _, bad := range []int{0, -1, 65536} {
		if _, err := j.DialInside(ctx, bad); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("port %d: %v", bad, err)
		}
	}

	p.Kill()
	p.Wait()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if c, err := j.DialInside(ctx, 8000); err == nil {
		c.Close()
		t.Fatal("dialled into a jail that is gone")
	} else {
		t.Logf("after the jail: %v", err)
	}
}

// TestDialInsideNeedsOwnNetns: a jail of unsafe mode shares the server's
// network namespace, whose loopback holds the server's own services: it
// is never dialled into.
func TestDialInsideNeedsOwnNetns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: builds cgroups (CI runs as root)")
	}
	m, err := New(Config{CgroupParent: testParent, Unsafe: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	j, err := m.Prepare(context.Background(), Base{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if c, err := j.DialInside(context.Background(), host.Addr().(*net.TCPAddr).Port); !errors.Is(err, ErrNoOwnNetns) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("unsafe jail: %v, want ErrNoOwnNetns", err)
	}
}
