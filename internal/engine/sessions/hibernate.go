package sessions

import (
	"context"
	"fmt"
	"time"

	"github.com/pyexec/pyexec/internal/snapshot"
)

// Hibernation: a session idle for Config.HibernateAfter is saved as a
// snapshot (snapshot.KindHibernation) and its kernel ended; it stays in
// the registry, under its caps and its idle timeout and lifetime, holding
// no memory. Its next call resumes it: a new kernel made as for any
// session, the snapshot loaded into it, the snapshot deleted. It never
// leaves this node.

// hibernate saves s, idle, and ends its kernel. A session that cannot be
// saved stays as it was (logged).
func (m *Service) hibernate(s *Live) {
	s.mu.Lock()
	last := s.last
	s.mu.Unlock()
	k, done, err := m.claim(s)
	if err != nil {
		return // a cell started meanwhile, or it ended
	}
	defer func() {
		done()
		s.mu.Lock()
		s.last = last // hibernating is not activity: the idle timeout still counts
		s.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(m.stopping, m.cfg.SaveTimeout) // Close gives up on it
	defer cancel()
	saved, err := m.save(ctx, s, k, snapshot.KindHibernation)
	if err != nil {
		m.log.Warn("a session could not hibernate; it stays awake", "session_id", s.id, "err", err)
		return
	}
	s.mu.Lock()
	s.k, s.asleep = nil, saved.ID
	s.mu.Unlock()
	k.stop()
	m.log.Info("session hibernated", "session_id", s.id, "snapshot_id", saved.ID, "bytes", saved.Bytes)
}

// wake resumes s if it hibernated, with s.run held: it reports whether it
// did. A session that cannot resume is ended (ErrEnded).
func (m *Service) wake(ctx context.Context, s *Live) (bool, error) {
	s.mu.Lock()
	id, gone := s.asleep, s.gone
	s.mu.Unlock()
	if id == "" || gone {
		return false, nil
	}
	if err := m.resume(ctx, s, id); err != nil {
		m.log.Warn("a hibernated session could not resume; it ends", "session_id", s.id, "snapshot_id", id, "err", err)
		m.endSession(s, "resume failed")
		return false, fmt.Errorf("%w: %s could not resume from its hibernation: %v", ErrEnded, s.id, err)
	}
	m.forgetSnapshot(id)
	m.log.Info("session resumed", "session_id", s.id, "snapshot_id", id)
	return true, nil
}

// resume loads hibernation snapshot id into a new kernel of s.
func (m *Service) resume(ctx context.Context, s *Live, id string) error {
	unhold, err := m.hold()
	if err != nil {
		return err
	}
	defer unhold()
	snap, err := m.deps.Vault.Open(ctx, id, s.caller)
	if err != nil {
		return err
	}
	defer snap.Close()
	k, err := m.startKernel(m.base, s.spec, s.startForks)
	if err != nil {
		return err
	}
	m.watchKernel(k)
	s.mu.Lock()
	if s.gone {
		s.mu.Unlock()
		k.proc.Kill()
		return fmt.Errorf("%w: %s", ErrEnded, s.id)
	}
	s.k, s.busy = k, true
	s.mu.Unlock()
	_, err = m.restoreInto(s, snap)
	s.mu.Lock()
	s.busy = false
	if err == nil {
		s.asleep = ""
	}
	s.mu.Unlock()
	return err
}

// awake returns s's kernel, resuming s first if it hibernated (for the
// calls that do not hold s.run otherwise: files).
func (m *Service) awake(s *Live) (*kernel, error) {
	s.mu.Lock()
	asleep := s.asleep != ""
	s.mu.Unlock()
	if asleep {
		s.run.Lock()
		_, err := m.wake(m.base, s)
		s.run.Unlock()
		if err != nil {
			return nil, err
		}
	}
	return liveKernel(s)
}

// forgetSnapshot deletes a hibernation snapshot no session needs any more.
func (m *Service) forgetSnapshot(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.deps.Vault.Delete(ctx, id); err != nil {
		m.log.Warn("deleting a hibernation snapshot", "snapshot_id", id, "err", err)
	}
}

// sleepy lists the sessions idle for HibernateAfter, awake, at t.
func (m *Service) sleepy(t time.Time) []*Live {
	if m.cfg.HibernateAfter <= 0 || m.deps.Vault == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Live
	for _, s := range m.live {
		s.mu.Lock()
		if s.k != nil && !s.busy && s.asleep == "" && t.Sub(s.last) >= m.cfg.HibernateAfter && !kernelEnded(s.k) {
			out = append(out, s)
		}
		s.mu.Unlock()
	}
	return out
}
