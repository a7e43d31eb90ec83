package sessions

// What a layer spreading sessions over a fleet needs from this node's
// sessions: their count against the cap, and word of each session's end
// (Deps.OnEnd).

// Live counts this node's live sessions (starting ones included).
func (m *Service) Live() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.live)
}

// Room fails with ErrTooMany when this node, or caller's sessions on it,
// are at their cap: a restore asks before it reads its snapshot (the cap
// is taken for good only when the session starts).
func (m *Service) Room(caller string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.roomFor(caller)
}

// Cap is the most sessions this node holds at once.
func (m *Service) Cap() int { return m.cfg.Max }

// sessionEnded tells Deps.OnEnd that s ended, and whether it ended
// because the service shuts down.
func (m *Service) sessionEnded(s *Live) {
	if m.deps.OnEnd == nil {
		return
	}
	m.mu.Lock()
	shutdown := m.closed
	m.mu.Unlock()
	m.deps.OnEnd(s.id, shutdown)
}
