package sessions

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// Errors of reaching a port a session serves (a preview).
var (
	// ErrPortClosed: nothing listens on that port inside the session
	// (502).
	ErrPortClosed = errors.New("nothing listens on this port inside the session")
	// ErrNoOwnNetwork: the session's jail shares a network namespace
	// (the server's, in unsafe mode), where its ports cannot be told from
	// others' (409). A session with network never forks (kernel.go).
	ErrNoOwnNetwork = errors.New("the session has no network namespace of its own (unsafe mode): its ports cannot be previewed")
)

// DialPort connects to port on the loopback of the session's own network
// namespace, from the server, adding nothing to the jail: its outbound
// network stays as it was. Opening a connection counts as the session's
// activity (its idle timeout starts again); traffic on a connection
// already open does not. A hibernated session resumes first; its
// hibernation had ended whatever served the port (a later hibernation
// closes the connections open to it).
func (m *Service) DialPort(ctx context.Context, s *Live, port int) (net.Conn, error) {
	s.files.RLock()
	defer s.files.RUnlock()
	k, err := m.awake(ctx, s)
	if err != nil {
		return nil, err
	}
	c, err := k.jail.DialInside(ctx, port)
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return nil, fmt.Errorf("%w: port %d of session %s", ErrPortClosed, port, s.id)
	case errors.Is(err, sandbox.ErrNoOwnNetns):
		return nil, fmt.Errorf("%w: %s", ErrNoOwnNetwork, s.id)
	case errors.Is(err, sandbox.ErrInvalidSpec):
		return nil, fmt.Errorf("%w: %w", run.ErrInvalid, err)
	case err != nil:
		if kernelEnded(k) {
			return nil, fmt.Errorf("%w: %s is restarting or ending", ErrBusy, s.id)
		}
		return nil, fmt.Errorf("engine: session %s: reaching port %d: %w", s.id, port, err)
	}
	s.mu.Lock()
	s.last = run.Now()
	s.mu.Unlock()
	return c, nil
}
