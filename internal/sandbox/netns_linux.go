package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// ListenInside opens a listener in the network namespace of a prepared
// jail without network, so that its payload can reach the caller through
// the jail's loopback while the socket's other side stays in the
// caller's process (a filtering proxy, say). Call it between Prepare and
// Run; the caller closes the listener.
//
// The listening socket is created on a thread moved into the jail's
// namespace and the thread moved back; a thread that cannot go back is
// never returned to the Go scheduler.
func (j *Jail) ListenInside(network, addr string) (net.Listener, error) {
	if j.base.Network || j.m.cfg.Unsafe {
		// A jail with network goes out through its egress only.
		return nil, fmt.Errorf("%w: only a jail without network takes a listener", ErrInvalidSpec)
	}
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		l, back, err := j.listenInNetns(network, addr)
		if back {
			runtime.UnlockOSThread()
		}
		ch <- result{l, err}
	}()
	r := <-ch
	return r.l, r.err
}

// listenInNetns runs on a locked thread. back reports whether the thread
// is in its original network namespace again.
func (j *Jail) listenInNetns(network, addr string) (_ net.Listener, back bool, _ error) {
	self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		return nil, true, err
	}
	defer self.Close()
	target, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", j.initPid()))
	if err != nil {
		return nil, true, fmt.Errorf("opening the jail's network namespace: %w", err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("entering the jail's network namespace: %w", os.NewSyscallError("setns", err))
	}
	l, lerr := net.Listen(network, addr)
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		if l != nil {
			l.Close()
		}
		return nil, false, errors.Join(lerr, fmt.Errorf("returning to the host network namespace: %w", os.NewSyscallError("setns", err)))
	}
	if lerr != nil {
		return nil, true, fmt.Errorf("listening in the jail: %w", lerr)
	}
	return l, true, nil
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
