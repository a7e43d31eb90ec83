package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Do runs f on a thread moved into the network namespace of process pid
// and back, and returns f's error. A thread that cannot go back is never
// returned to the Go scheduler: the runtime ends it with its goroutine.
func Do(pid int, f func() error) error { return do(pid, nil, f) }

// do is Do; alive, if set, is asked once the namespace is open and before
// it is entered whether pid still names the caller's process (a pid is
// reused once its process is reaped), so that a namespace is never
// entered on a stale pid.
func do(pid int, alive func() error, f func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		back, err := run(pid, alive, f)
		if back {
			runtime.UnlockOSThread()
		}
		ch <- err
	}()
	return <-ch
}

// run runs on a locked thread; back reports whether the thread is in its
// original namespace again.
func run(pid int, alive func() error, f func() error) (back bool, _ error) {
	self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		return true, err
	}
	defer self.Close()
	target, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return true, fmt.Errorf("opening the jail's network namespace: %w", err)
	}
	defer target.Close()
	if alive != nil {
		if err := alive(); err != nil {
			return true, fmt.Errorf("the jail's process is gone: %w", err)
		}
	}
	if err := sameNamespace(self, target); err != nil {
		return true, err
	}
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return true, fmt.Errorf("entering the jail's network namespace: %w", os.NewSyscallError("setns", err))
	}
	ferr := f()
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		return false, errors.Join(ferr, fmt.Errorf("returning to the host network namespace: %w", os.NewSyscallError("setns", err)))
	}
	return true, ferr
}

// Listen opens a listener in the network namespace of process pid: the
// listening socket belongs to that namespace while its file stays in the
// caller's process.
func Listen(pid int, network, addr string) (net.Listener, error) {
	var l net.Listener
	err := Do(pid, func() error {
		var err error
		if l, err = net.Listen(network, addr); err != nil {
			return fmt.Errorf("listening in the jail: %w", err)
		}
		return nil
	})
	if err != nil {
		if l != nil {
			l.Close()
		}
		return nil, err
	}
	return l, nil
}

// sameNamespace fails when target is the namespace self is in: whatever
// the pid named, it is not a jail of its own, and nothing the server does
// for a jail may happen in the server's own network namespace (its
// loopback holds the API, NATS and the operator's services).
func sameNamespace(self, target *os.File) error {
	var a, b unix.Stat_t
	if err := unix.Fstat(int(self.Fd()), &a); err != nil {
		return os.NewSyscallError("fstat", err)
	}
	if err := unix.Fstat(int(target.Fd()), &b); err != nil {
		return os.NewSyscallError("fstat", err)
	}
	if a.Dev == b.Dev && a.Ino == b.Ino {
		return errors.New("the process shares the server's network namespace")
	}
	return nil
}

// Dial connects to addr from inside the network namespace of process
// pid: the socket is made there, so its peer is what listens on that
// namespace's addresses (its loopback), while the connection's file stays
// in the caller's process. alive is asked, once the namespace is open and
// before it is entered, whether pid is still the caller's process.
func Dial(ctx context.Context, pid int, alive func() error, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := do(pid, alive, func() error {
		// A literal address: no resolver runs, and the socket is made on
		// this thread, in the namespace it entered.
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	if err != nil {
		if c != nil {
			c.Close()
		}
		return nil, err
	}
	return c, nil
}

// Shared reports whether processes a and b are in the same network
// namespace.
func Shared(a, b int) (bool, error) {
	var sa, sb unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/net", a), &sa); err != nil {
		return false, os.NewSyscallError("stat", err)
	}
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/net", b), &sb); err != nil {
		return false, os.NewSyscallError("stat", err)
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino, nil
}
