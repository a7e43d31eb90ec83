package engine

// What a layer spreading sessions over a fleet needs from this node's
// sessions: their count against the cap, and word of each session's end
// (Deps.OnSessionEnd).

// LiveSessions counts this node's live sessions (starting ones included).
func (e *Engine) LiveSessions() int {
	e.sess.mu.Lock()
	defer e.sess.mu.Unlock()
	return len(e.sess.live)
}

// SessionCap is the most sessions this node holds at once.
func (e *Engine) SessionCap() int { return e.cfg.Sessions.Max }

// sessionEnded tells Deps.OnSessionEnd that s ended, and whether it ended
// because the engine shuts down.
func (e *Engine) sessionEnded(s *session) {
	if e.deps.OnSessionEnd == nil {
		return
	}
	e.sess.mu.Lock()
	shutdown := e.sess.closed
	e.sess.mu.Unlock()
	e.deps.OnSessionEnd(s.id, shutdown)
}
