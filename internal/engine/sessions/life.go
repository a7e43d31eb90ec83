package sessions

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
)

// Restart replaces the session's interpreter with a fresh one in a fresh
// jail: variables and imports are gone, the workspace files are carried
// over, the execution count starts again. A running cell is killed.
func (m *Service) Restart(ctx context.Context, s *Live) (Session, error) {
	id := s.id
	unhold, err := m.hold()
	if err != nil {
		return Session{}, err
	}
	defer unhold()
	if _, err := m.awake(ctx, s); err != nil {
		return Session{}, err
	}
	old := s.kernel()
	if old == nil {
		return Session{}, fmt.Errorf("%w: %s is restarting", ErrBusy, id)
	}
	// The new kernel's network is checked before the old one goes: a
	// secret the key may no longer use refuses the restart, and the
	// session keeps its kernel.
	s.mu.Lock()
	spec := s.spec
	s.mu.Unlock()
	spec, np, err := m.replanNetwork(s, spec)
	if err != nil {
		return Session{}, err
	}
	// A running cell holds s.run: kill its kernel first so that it ends.
	files, err := m.workspaceFiles(old, s.spec.Limits.WorkspaceBytes)
	if errors.Is(err, os.ErrProcessDone) {
		// Its interpreter ended, and its files with its jail: a restart
		// would keep none of them, which it promises to.
		return Session{}, m.kernelErr(s, err)
	}
	if errors.Is(err, ErrWorkspaceTooLarge) {
		return Session{}, fmt.Errorf("%s: %w", id, err) // it keeps its kernel
	}
	if err != nil {
		return Session{}, fmt.Errorf("engine: keeping the session's files: %w", err)
	}
	s.mu.Lock()
	s.k = nil
	s.mu.Unlock()
	old.stop()
	s.run.Lock()
	defer s.run.Unlock()
	s.mu.Lock()
	s.spec.Env, s.net = spec.Env, np
	s.mu.Unlock()
	spec.Files = files
	k, err := m.startKernel(m.base, spec, s.startForks, s.kernelNet())
	if err != nil {
		m.endSession(s, "restart failed")
		return Session{}, fmt.Errorf("engine: restarting session %s: %w", id, err)
	}
	s.mu.Lock()
	if s.gone {
		s.mu.Unlock()
		k.proc.Kill()
		m.watchKernel(k)
		return Session{}, fmt.Errorf("%w: %s", ErrEnded, id)
	}
	s.k, s.count, s.last = k, 0, run.Now()
	s.restarts++
	s.mu.Unlock()
	m.watchKernel(k)
	m.dropCheckpoint(s) // its state is gone: the checkpoint would bring it back
	return s.Info(), nil
}

// reapSessions ends idle and expired sessions every ReapInterval until
// ctx ends, then parks or ends every session (park.go).
func (m *Service) reapSessions(ctx context.Context) {
	t := time.NewTicker(m.cfg.ReapInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			m.shutdown()
			return
		case <-t.C:
			now := time.Now()
			for _, s := range m.expired(now) {
				m.endSession(s.s, s.why)
			}
			m.startHibernations(now)
			m.recheckNetwork()
		}
	}
}

type reaped struct {
	s   *Live
	why string
}

// expired lists the sessions to end at t: idle past their timeout (a busy,
// still starting or preparing session is never idle), past their lifetime, or whose
// interpreter died.
func (m *Service) expired(t time.Time) []reaped {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []reaped
	for _, s := range m.live {
		s.mu.Lock()
		switch {
		case !t.Before(s.expires):
			out = append(out, reaped{s, "max lifetime reached"})
		case (s.k != nil || s.asleep != "") && !s.busy && !s.preparing && t.Sub(s.last) >= s.idle:
			out = append(out, reaped{s, "idle timeout"})
		case s.k != nil && kernelEnded(s.k) && !s.busy:
			out = append(out, reaped{s, "interpreter ended"})
		}
		s.mu.Unlock()
	}
	return out
}

func kernelEnded(k *kernel) bool {
	select {
	case <-k.ended:
		return true
	default:
		return false
	}
}

func sortSessions(list []Session) {
	slices.SortFunc(list, func(a, b Session) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}
