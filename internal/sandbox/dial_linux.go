package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"github.com/pyexec/pyexec/internal/sandbox/netns"
)

// DialInside connects to port on the loopback of the jail's network
// namespace: to a server the payload listens with on 127.0.0.1, ::1 or
// every address. The socket is made in the jail's namespace from this
// process, so nothing is added to the jail (no interface, no route, no
// port on the host) and its outbound network stays as it was: a jail
// without network still reaches nothing. A refused connection is tried
// again on ::1, for a server that listens there only; the error then
// wraps syscall.ECONNREFUSED.
//
// Only a jail with a namespace of its own takes it. A forked jail has one
// too (its fork server makes one per execution), but one with network is
// refused all the same: no caller needs it (sessions with network never
// fork), and its egress is meant to be its only way in or out.
func (j *Jail) DialInside(ctx context.Context, port int) (net.Conn, error) {
	if j.m.cfg.Unsafe || (j.reaper != nil && j.base.Network) {
		return nil, ErrNoOwnNetns
	}
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("%w: port %d", ErrInvalidSpec, port)
	}
	pid := j.initPid()
	if pid <= 0 {
		return nil, errors.New("the jail has not started")
	}
	p := strconv.Itoa(port)
	c, err := netns.Dial(ctx, pid, j.stillAlive, "tcp", net.JoinHostPort("127.0.0.1", p))
	if errors.Is(err, syscall.ECONNREFUSED) {
		if c6, err6 := netns.Dial(ctx, pid, j.stillAlive, "tcp", net.JoinHostPort("::1", p)); err6 == nil {
			return c6, nil
		}
	}
	return c, err
}

// stillAlive fails once the jail's PID 1 has been reaped, when its pid
// may name another process: the reaper of a forked jail is asked through
// its pidfd, a jail's own init through the pidfd its exec.Cmd holds.
func (j *Jail) stillAlive() error {
	if j.reaper != nil {
		return j.reaper.alive()
	}
	if j.cmd == nil || j.cmd.Process == nil {
		return errors.New("the jail has not started")
	}
	return j.cmd.Process.Signal(syscall.Signal(0))
}
