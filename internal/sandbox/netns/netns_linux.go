package netns

import (
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
func Do(pid int, f func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		back, err := run(pid, f)
		if back {
			runtime.UnlockOSThread()
		}
		ch <- err
	}()
	return <-ch
}

// run runs on a locked thread; back reports whether the thread is in its
// original namespace again.
func run(pid int, f func() error) (back bool, _ error) {
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
