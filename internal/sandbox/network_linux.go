package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/pyexec/pyexec/internal/sandbox/netns"
)

// AttachEgress gives a prepared jail with network its route out: a TUN
// device in the jail's network namespace, addressed and routed as
// EgressJailAddr4 (and EgressJailAddr6), whose file e then serves. Call
// it between Prepare and Run (Manager.Run does for Spec.Egress), or on a
// warm jail between Start and its payload's HandOff, before any of the
// execution's code runs (the warm pool does). The device
// is created from this process (the payload has no capability to make or
// change interfaces) and dies with the namespace; one made ahead
// (PrepareEgressLink) is used if there is one.
func (j *Jail) AttachEgress(e Egress) error {
	j.mu.Lock()
	tun := j.egressLink
	j.egressLink = nil
	j.mu.Unlock()
	if tun != nil {
		// Made while the jail waited: its PID 1 must still be the one
		// it was made for.
		if err := j.stillAlive(); err != nil {
			tun.Close()
			return fmt.Errorf("egress link: the jail's process is gone: %w", err)
		}
		// A device removed since is made anew, or fails with its reason.
		if netns.Serving(tun) != nil {
			tun.Close()
			tun = nil
		}
	}
	if tun == nil {
		var err error
		if tun, err = j.openEgressLink(); err != nil {
			return err
		}
	}
	if err := e.Serve(tun); err != nil {
		tun.Close()
		return fmt.Errorf("egress: %w", err)
	}
	return nil
}

// PrepareEgressLink makes ahead, on a warm jail with network waiting for
// its execution, the device AttachEgress will hand to that execution's
// egress, so that the hand-off only starts serving it. Nothing reads the
// device until then. It is this jail's alone, in its own namespace, and
// is closed with the jail unless an egress took it.
func (j *Jail) PrepareEgressLink() error {
	errHas := errors.New("egress link: the jail is closed or has one")
	// Checked before the device is made as well as after (a device of
	// the same name fails to be made, see netns.OpenLink).
	j.mu.Lock()
	taken := j.closed || j.egressLink != nil
	j.mu.Unlock()
	if taken {
		return errHas
	}
	tun, err := j.openEgressLink()
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed || j.egressLink != nil {
		tun.Close()
		return errHas
	}
	j.egressLink = tun
	return nil
}

// openEgressLink makes the jail's TUN device and returns its file.
func (j *Jail) openEgressLink() (*os.File, error) {
	if !j.base.Network || j.m.cfg.Unsafe {
		return nil, fmt.Errorf("%w: the jail has no network namespace with network on", ErrInvalidSpec)
	}
	// A forked execution makes its own namespace before its payload
	// starts (Fork returns after that): were it still in its fork
	// server's, the device would be every later fork's.
	if j.template != nil {
		shared, err := netns.Shared(j.initPid(), j.template.initPid())
		if err != nil || shared {
			return nil, fmt.Errorf("egress link: the forked execution is not in a network namespace of its own (%v)", err)
		}
	}
	// A forked execution's PID 1 is named by a pid the fork server reaps:
	// it is checked once the namespace is open (stillAlive).
	tun, err := netns.OpenLink(j.initPid(), j.stillAlive, netns.Link{Name: EgressInterface, MTU: EgressMTU,
		Addr4: EgressJailAddr4, Addr6: EgressJailAddr6})
	if err != nil {
		return nil, fmt.Errorf("egress link: %w", err)
	}
	return tun, nil
}

// ListenInside opens a listener in the network namespace of a prepared
// jail without network, so that its payload can reach the caller through
// the jail's loopback while the socket's other side stays in the
// caller's process (a filtering proxy, say). Call it between Prepare and
// Run; the caller closes the listener.
func (j *Jail) ListenInside(network, addr string) (net.Listener, error) {
	if j.base.Network || j.m.cfg.Unsafe {
		// A jail with network goes out through its egress only.
		return nil, fmt.Errorf("%w: only a jail without network takes a listener", ErrInvalidSpec)
	}
	return netns.Listen(j.initPid(), network, addr)
}

// PayloadOwner returns the host uid and gid that own what a payload
// creates in a writable mount: the configured payload ids, or the
// server's own ids when jails run in a user namespace.
func (m *Manager) PayloadOwner() (uid, gid int) {
	if m.userns {
		return os.Geteuid(), os.Getegid()
	}
	return m.cfg.UID, m.cfg.GID
}
