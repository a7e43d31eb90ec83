package cgroups

import "sync"

// spares keeps the vacated cgroups of finished executions for the
// next ones: creating a cgroup (a directory in each v1 hierarchy, or one on
// v2) and removing it again cost the server and the kernel more than the
// rest of a forked execution's setup. A spare holds no task and almost no
// memory (Cgroup.vacate), and is reset when taken (Cgroup.reuse).
type spares struct {
	mu     sync.Mutex
	free   []Cgroup
	max    int
	closed bool
}

// take returns a spare, or nil when there is none.
func (s *spares) take() Cgroup {
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
func (s *spares) put(cg Cgroup) bool {
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
func (s *spares) drain(closing bool) []Cgroup {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = s.closed || closing
	out := s.free
	s.free = nil
	return out
}
