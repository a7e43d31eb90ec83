package sandbox

import (
	"errors"
	"sync"
)

// cgroupSpares keeps the vacated cgroups of finished executions for the
// next ones: creating a cgroup (a directory in each v1 hierarchy, or one on
// v2) and removing it again cost the server and the kernel more than the
// rest of a forked execution's setup. A spare holds no task and almost no
// memory (jailCgroup.vacate), and is reset when taken (jailCgroup.reuse).
type cgroupSpares struct {
	mu     sync.Mutex
	free   []jailCgroup
	max    int
	closed bool
}

// take returns a spare, or nil when there is none.
func (s *cgroupSpares) take() jailCgroup {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.free)
	if n == 0 {
		return nil
	}
	cg := s.free[n-1]
	s.free[n-1] = nil
	s.free = s.free[:n-1]
	return cg
}

// put keeps cg unless the list is full or closed; false: the caller
// removes it.
func (s *cgroupSpares) put(cg jailCgroup) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || len(s.free) >= s.max {
		return false
	}
	s.free = append(s.free, cg)
	return true
}

// drain empties the list and returns what it held; closing it too, it
// keeps nothing from then on.
func (s *cgroupSpares) drain(closing bool) []jailCgroup {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = s.closed || closing
	out := s.free
	s.free = nil
	return out
}

// removeSpares removes the cgroups kept for reuse; closing, it keeps none
// from then on.
func (m *Manager) removeSpares(closing bool) error {
	var errs []error
	for _, cg := range m.spares.drain(closing) {
		errs = append(errs, cg.destroy())
	}
	return errors.Join(errs...)
}

// newCgroup gives a jail its cgroup with initial limits: a spare if one
// can be reset, else a new one named id.
func (m *Manager) newCgroup(id string, initial Limits) (jailCgroup, error) {
	for cg := m.spares.take(); cg != nil; cg = m.spares.take() {
		err := cg.reuse(initial)
		if err == nil {
			return cg, nil
		}
		m.log.Debug("not reusing a cgroup", "err", err)
		if err := cg.destroy(); err != nil {
			m.log.Warn("removing a cgroup", "err", err)
		}
	}
	return m.cgroups.create(id, initial)
}

// dropCgroup ends a dead jail's use of cg: kept as a spare when it is
// provably vacant and there is room, removed otherwise.
func (m *Manager) dropCgroup(cg jailCgroup) error {
	if m.spares.max > 0 {
		err := cg.vacate()
		if err == nil && m.spares.put(cg) {
			return nil
		}
		if err != nil {
			m.log.Debug("not keeping a cgroup for reuse", "err", err)
		}
	}
	return cg.destroy()
}

// Close waits for every jail given to Release (Wait) and removes the
// cgroups kept for reuse. Jails made after it get new cgroups and remove
// them when they end.
func (m *Manager) Close() error {
	m.Wait()
	return m.removeSpares(true)
}
