package sandbox

import (
	"os"

	"golang.org/x/sys/unix"
)

// The payload's result channel and request pipe are not inherited: PID 1
// of the jail (init, or a forked execution's reaper) holds them and hands
// them out on a unix socket at relayPath, whose path it gives the payload
// in relayEnv. Each connection receives, as SCM_RIGHTS, the pipes the
// execution has, tagged by one byte each in the message (relayChannel,
// relayRequests); the runner driver fetches them for one write or one
// session cell and closes them again, so that user code starts, and runs,
// with fds 0-2 only. The socket lives in the execution's own /dev/shm
// (root's, mode 0666, in a sticky directory: the payload can connect but
// neither remove nor replace it), which no other execution sees.
const (
	relayPath     = "/dev/shm/.pyexec-relay"
	relayEnv      = "PYEXEC_RELAY"
	relayChannel  = 'c'
	relayRequests = 'r'
)

// listenRelay binds the relay socket; init calls it once /dev/shm is
// mounted and before the payload exists.
func listenRelay() (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: relayPath}); err != nil {
		unix.Close(fd)
		return -1, os.NewSyscallError("bind", err)
	}
	if err := unix.Fchmodat(unix.AT_FDCWD, relayPath, 0o666, 0); err != nil {
		unix.Close(fd)
		return -1, os.NewSyscallError("chmod", err)
	}
	if err := unix.Listen(fd, 64); err != nil {
		unix.Close(fd)
		return -1, os.NewSyscallError("listen", err)
	}
	return fd, nil
}

// serveRelay answers every connection on lfd with fds, tagged by tags,
// until lfd fails (init's exit ends it). It never reads from a client, so
// no client can hold it up.
func serveRelay(lfd int, tags []byte, fds []int) {
	rights := unix.UnixRights(fds...)
	for {
		c, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
		switch err {
		case nil:
		case unix.EINTR, unix.ECONNABORTED:
			continue
		default:
			return
		}
		_ = unix.Sendmsg(c, tags, rights, nil, unix.MSG_NOSIGNAL)
		unix.Close(c)
	}
}

// startRelay serves the pipes x asks for from a jail's init. It serves
// copies of its own: init gives the payload fdRequests through an
// *os.File that nothing keeps, whose finalizer closes the descriptor
// whenever the garbage collector first runs (after some thousand relay
// connections). Served by number, the relay would then fail every later
// fetch, and a session's kernel read no more cells.
func startRelay(x *execMsg) error {
	var tags []byte
	var fds []int
	if x.Channel {
		tags, fds = append(tags, relayChannel), append(fds, fdChannel)
	}
	if x.Requests {
		tags, fds = append(tags, relayRequests), append(fds, fdRequests)
	}
	for i, fd := range fds {
		own, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, fdForkSock+1)
		if err != nil {
			for _, c := range fds[:i] {
				unix.Close(c)
			}
			return os.NewSyscallError("fcntl", err)
		}
		fds[i] = own
	}
	lfd, err := listenRelay()
	if err != nil {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return err
	}
	go serveRelay(lfd, tags, fds)
	return nil
}
