package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/pyexec/pyexec/internal/egress/egresstest"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// TestFinishThenTeardown: Finish returns with every event of the
// execution out while its device still exists; from then on the egress
// answers nothing the namespace sends (a DNS query goes unanswered), and
// the teardown it returns removes the device and ends every goroutine the
// egress started, once however often it is run.
func TestFinishThenTeardown(t *testing.T) {
	w := egresstest.New(t)
	cfg := testConfig(t, w, "allowed.test")
	m, err := sandbox.New(sandbox.Config{CgroupParent: fmt.Sprintf("pyexec-egress-test-%d", pid())})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Wait()
	goroutines := runtime.NumGoroutine()
	rec := &recorder{}
	eg := New(cfg, Grant{Policy: cfg.Policy}, rec.hooks())
	code := `
import socket
try:
    socket.create_connection(("denied.test", 80), timeout=5)
except OSError as e:
    print("refused")`
	res, err := m.Run(context.Background(), sandbox.Spec{Argv: []string{"/usr/bin/python3", "-c", code},
		Env: []string{"PATH=/usr/bin:/bin"}, Network: true, Egress: eg, Limits: sandbox.Limits{WallTime: 20 * time.Second}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != sandbox.StatusOK || string(res.Stdout) != "refused\n" {
		t.Fatalf("status %s stdout %q stderr %q", res.Status, res.Stdout, res.Stderr)
	}
	// The device's namespace, held here so that it can be looked at
	// after the teardown (the jail's processes are gone).
	ns, err := unix.IoctlRetInt(eg.tunFD, unix.TUNGETDEVNETNS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ns)
	teardown := eg.Finish()
	if !rec.find("dns", "denied.test", VerdictDeny, ReasonNotAllowed) {
		t.Errorf("Finish returned before the execution's events were out: %+v", rec.events)
	}
	if !hasLink(t, ns, sandbox.EgressInterface) {
		t.Fatal("the device is gone before the teardown")
	}
	if err := inNamespace(ns, func() error {
		c, err := net.Dial("udp", net.JoinHostPort(sandbox.EgressDNSAddr4.String(), "53"))
		if err != nil {
			return err
		}
		defer c.Close()
		// A query for allowed.test; any answer would do to fail.
		q := []byte{0, 7, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 7, 'a', 'l', 'l', 'o', 'w', 'e', 'd', 4, 't', 'e', 's', 't', 0, 0, 1, 0, 1}
		if _, err := c.Write(q); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		if n, err := c.Read(make([]byte, 512)); err == nil {
			return fmt.Errorf("the egress answered a query after Finish (%d bytes)", n)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	if err := teardown(); err != nil {
		t.Errorf("teardown: %v", err)
	}
	// Run again, it does nothing: its descriptor may be another's now.
	if err := teardown(); err != nil {
		t.Errorf("a second run of the teardown: %v", err)
	}
	if hasLink(t, ns, sandbox.EgressInterface) {
		t.Error("the device outlived the teardown")
	}
	if err := eg.Close(); err != nil {
		t.Errorf("Close after the teardown: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > goroutines && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		t.Errorf("%d goroutines after the teardown, %d before the egress", n, goroutines)
	}
}

// hasLink reports whether the network namespace of descriptor ns has an
// interface name.
func hasLink(t *testing.T, ns int, name string) bool {
	t.Helper()
	h, err := netlink.NewHandleAt(vnetns.NsHandle(ns), unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	_, err = h.LinkByName(name)
	var missing netlink.LinkNotFoundError
	if err != nil && !errors.As(err, &missing) {
		t.Fatal(err)
	}
	return err == nil
}

// inNamespace runs f on a thread in the network namespace of descriptor
// ns; a thread that cannot come back is left to end with its goroutine.
func inNamespace(ns int, f func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			ch <- err
			return
		}
		defer self.Close()
		if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
			ch <- err
			return
		}
		ferr := f()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- errors.Join(ferr, err)
			return
		}
		runtime.UnlockOSThread()
		ch <- ferr
	}()
	return <-ch
}
