package sandbox

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// servedTUN is an Egress that keeps the device it is given.
type servedTUN struct{ tun *os.File }

func (s *servedTUN) Serve(tun *os.File) error { s.tun = tun; return nil }

// linkNamespace returns a descriptor of the network namespace of the
// device made ahead for j, to look at it once the jail is gone.
func linkNamespace(t *testing.T, j *Jail) int {
	t.Helper()
	rc, err := j.egressLink.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ns int
	var ioctlErr error
	if err := rc.Control(func(fd uintptr) { ns, ioctlErr = unix.IoctlRetInt(int(fd), unix.TUNGETDEVNETNS) }); err != nil || ioctlErr != nil {
		t.Fatal(err, ioctlErr)
	}
	t.Cleanup(func() { unix.Close(ns) })
	return ns
}

// egressLinkIn returns the egress device of namespace ns (nil if it has
// none) and a handle on that namespace.
func egressLinkIn(t *testing.T, ns int) (netlink.Link, *netlink.Handle) {
	t.Helper()
	h, err := netlink.NewHandleAt(vnetns.NsHandle(ns), unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	l, _ := h.LinkByName(EgressInterface)
	return l, h
}

// TestEgressLinkMadeAhead: a jail has one egress device made ahead; one
// removed before the hand-off is made anew there, so the execution has
// its route out; a jail closed with its device never handed off leaves
// none behind.
func TestEgressLinkMadeAhead(t *testing.T) {
	m := needJail(t)
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("needs /dev/net/tun: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("removed before the hand-off", func(t *testing.T) {
		j, err := m.Prepare(ctx, Base{Network: true})
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		if err := j.PrepareEgressLink(); err != nil {
			t.Fatal(err)
		}
		if err := j.PrepareEgressLink(); err == nil {
			t.Fatal("a second device was made ahead")
		}
		l, h := egressLinkIn(t, linkNamespace(t, j))
		if l == nil {
			t.Fatal("no device made ahead")
		}
		if err := h.LinkDel(l); err != nil {
			t.Fatal(err)
		}
		eg := &servedTUN{}
		if err := j.AttachEgress(eg); err != nil {
			t.Fatal(err)
		}
		defer eg.tun.Close()
		res, err := j.Run(ctx, Spec{Argv: []string{python, "-c", "import socket\nprint(sorted(n for _, n in socket.if_nameindex()))"},
			Env: []string{"PATH=/usr/bin"}, Network: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != StatusOK || !strings.Contains(string(res.Stdout), "'"+EgressInterface+"'") {
			t.Fatalf("the execution has no egress device: %s %q %q", res.Status, res.Stdout, res.Stderr)
		}
	})

	t.Run("closed with the jail", func(t *testing.T) {
		j, err := m.Prepare(ctx, Base{Network: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := j.PrepareEgressLink(); err != nil {
			t.Fatal(err)
		}
		ns := linkNamespace(t, j)
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		if l, _ := egressLinkIn(t, ns); l != nil {
			t.Error("the device made ahead outlived its jail")
		}
		if err := j.AttachEgress(&servedTUN{}); err == nil {
			t.Error("AttachEgress on a closed jail succeeded")
		}
	})
}
