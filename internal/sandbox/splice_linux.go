package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// SpliceChannel moves the next n bytes of p's result channel into dst's
// request pipe inside the kernel (splice(2) from pipe to pipe): they never
// pass through this process's memory, nor through p's OutputFunc. It is
// for a session's state on its way from one kernel into another (a fork),
// and may only be called from p's channel OutputFunc, while the capture
// that reads the channel waits on it: nothing else reads the channel
// then; and only for a channel the jail does not keep (Spec.LiveOnly),
// which has no limit to go round. It returns the bytes moved; fewer than n with the error that
// stopped it (p's channel ended, dst's pipe closed: dst was killed).
func (p *Process) SpliceChannel(dst *Process, n int64) (int64, error) {
	if !p.channel.discard {
		// A channel that is kept counts its bytes against its limit:
		// none may go round it.
		return 0, fmt.Errorf("%w: only a channel that is not kept can be spliced (Spec.LiveOnly)", ErrInvalidSpec)
	}
	if !dst.exec.Requests {
		return 0, fmt.Errorf("%w: the payload has no request pipe (Spec.Requests)", ErrInvalidSpec)
	}
	dst.sendMu.Lock()
	defer dst.sendMu.Unlock()
	moved, err := splicePipes(p.j.chanR, dst.j.reqW, n)
	if err != nil {
		err = fmt.Errorf("passing the channel on: %w", err)
	}
	return moved, err
}

// splicePipes moves n bytes from the pipe src to the pipe dst, both
// non-blocking and in the runtime's poller, waiting on either as needed.
func splicePipes(src, dst *os.File, n int64) (int64, error) {
	rc, err := src.SyscallConn()
	if err != nil {
		return 0, err
	}
	wc, err := dst.SyscallConn()
	if err != nil {
		return 0, err
	}
	var moved int64
	var serr error
	for moved < n && serr == nil {
		err := rc.Read(func(in uintptr) bool {
			empty := false
			werr := wc.Write(func(out uintptr) bool {
				m, err := unix.Splice(int(in), nil, int(out), nil, int(min(n-moved, bulkPipeSize)),
					unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
				switch {
				case err == unix.EINTR:
					return true // tried again at once
				case err == unix.EAGAIN:
					// Either side may be the cause (TIOCINQ is FIONREAD:
					// the bytes a pipe holds): an empty source waits
					// for bytes, a full destination for room.
					if k, ierr := unix.IoctlGetInt(int(in), unix.TIOCINQ); ierr != nil || k == 0 {
						empty = true
						return true
					}
					// The source had bytes by the time it was asked:
					// they may have come after the splice looked, with
					// the destination never full. The poller is edge
					// triggered and a pipe with room sends no edge when
					// read, so waiting for one would wait for ever:
					// wait only for a destination full now.
					if hasRoom(int(out)) {
						return true
					}
					return false
				case err != nil:
					serr = err
				case m == 0:
					serr = io.ErrUnexpectedEOF
				default:
					moved += m
				}
				return true
			})
			if werr != nil && serr == nil {
				serr = werr
			}
			return !empty
		})
		if err != nil && serr == nil {
			serr = err
		}
	}
	if errors.Is(serr, unix.EPIPE) {
		serr = io.ErrClosedPipe
	}
	return moved, serr
}

// hasRoom reports whether the pipe fd can take a write now (poll(2) is
// level triggered; a reader gone counts too, so that the next write
// reports it).
func hasRoom(fd int) bool {
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	for {
		k, err := unix.Poll(p, 0)
		if err == unix.EINTR {
			continue
		}
		return err == nil && k > 0 && p[0].Revents&(unix.POLLOUT|unix.POLLERR) != 0
	}
}
