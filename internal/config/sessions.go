package config

import (
	"time"

	"github.com/spf13/pflag"
)

// Sessions configures stateful sessions (POST /api/v1/sessions).
type Sessions struct {
	// Max bounds the live sessions of the server, MaxPerKey those of one
	// API key.
	Max       int
	MaxPerKey int
	// IdleTimeout ends a session without a cell for that long (the
	// default; a request may ask for up to MaxIdleTimeout).
	IdleTimeout    time.Duration
	MaxIdleTimeout time.Duration
	// Lifetime ends a session that long after its creation (the default;
	// a request may ask for up to MaxLifetime).
	Lifetime    time.Duration
	MaxLifetime time.Duration
	// MemoryMB is a session's memory when it asks for none (all cells),
	// capped by MaxMemoryMB.
	MemoryMB int
}

func defaultSessions() Sessions {
	return Sessions{Max: 32, MaxPerKey: 8, IdleTimeout: 10 * time.Minute, MaxIdleTimeout: time.Hour,
		Lifetime: time.Hour, MaxLifetime: 24 * time.Hour, MemoryMB: 256}
}

func (s *Sessions) bind(fs *pflag.FlagSet) {
	add := func(name, usage string) { describe(fs, name, usage) }
	fs.IntVar(&s.Max, "max-sessions", s.Max, "")
	add("max-sessions", "live sessions on this server at most")
	fs.IntVar(&s.MaxPerKey, "max-sessions-per-key", s.MaxPerKey, "")
	add("max-sessions-per-key", "live sessions of one API key at most")
	fs.Var(secondsValue{&s.IdleTimeout}, "session-idle-timeout", "")
	add("session-idle-timeout", "a session without a cell for this long ends (when the request sets none)")
	fs.Var(secondsValue{&s.MaxIdleTimeout}, "max-session-idle-timeout", "")
	add("max-session-idle-timeout", "largest idle timeout a session may ask for")
	fs.Var(secondsValue{&s.Lifetime}, "session-lifetime", "")
	add("session-lifetime", "a session ends this long after its creation (when the request sets none)")
	fs.Var(secondsValue{&s.MaxLifetime}, "max-session-lifetime", "")
	add("max-session-lifetime", "largest lifetime a session may ask for")
	fs.IntVar(&s.MemoryMB, "session-memory-mb", s.MemoryMB, "")
	add("session-memory-mb", "memory in MiB of a session (all its cells) that asks for none")
}

func (c *Config) validateSessions(bad func(env, format string, args ...any)) {
	s := c.Sessions
	if s.Max < 1 || s.MaxPerKey < 1 {
		bad("PYEXEC_MAX_SESSIONS", "must be at least 1 (and PYEXEC_MAX_SESSIONS_PER_KEY too), got %d and %d", s.Max, s.MaxPerKey)
	}
	if s.IdleTimeout < time.Second || s.IdleTimeout > s.MaxIdleTimeout {
		bad("PYEXEC_SESSION_IDLE_TIMEOUT", "must be at least 1s and at most PYEXEC_MAX_SESSION_IDLE_TIMEOUT (%v), got %v", s.MaxIdleTimeout, s.IdleTimeout)
	}
	if s.Lifetime < time.Second || s.Lifetime > s.MaxLifetime {
		bad("PYEXEC_SESSION_LIFETIME", "must be at least 1s and at most PYEXEC_MAX_SESSION_LIFETIME (%v), got %v", s.MaxLifetime, s.Lifetime)
	}
	if s.MemoryMB < 4 {
		bad("PYEXEC_SESSION_MEMORY_MB", "must be at least 4, got %d", s.MemoryMB)
	}
}
