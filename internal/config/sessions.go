package config

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/pyexec/pyexec/internal/snapshot"
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
	// HibernateAfter saves a session idle for that long as a snapshot and
	// ends its interpreter; its next call resumes it. Zero: never.
	HibernateAfter time.Duration
	// CheckpointEvery saves a session, after a cell, when that long
	// passed since its last checkpoint: a node killed without warning
	// loses only the cells since. Zero: never.
	CheckpointEvery time.Duration
	// SaveTimeout bounds saving or loading one session's state (a
	// snapshot, a hibernation, a resume); Hibernations is how many
	// sessions are saved for hibernation at once; SnapshotSpools how
	// many snapshots this node reads from the store and verifies at once.
	SaveTimeout    time.Duration
	Hibernations   int
	SnapshotSpools int
	// SnapshotKey is the 64 hexadecimal digits every snapshot is
	// authenticated with; every node of a fleet needs the same. Empty:
	// the key made at the first start in DATA_DIR/snapshot.key.
	SnapshotKey string
	// SnapshotMaxBytes caps one snapshot; SnapshotQuotaBytes and
	// SnapshotQuota bound the snapshots one API key keeps.
	SnapshotMaxBytes   int64
	SnapshotQuotaBytes int64
	SnapshotQuota      int
}

func defaultSessions() Sessions {
	return Sessions{Max: 32, MaxPerKey: 8, IdleTimeout: 10 * time.Minute, MaxIdleTimeout: time.Hour,
		Lifetime: time.Hour, MaxLifetime: 24 * time.Hour, MemoryMB: 256,
		HibernateAfter: 5 * time.Minute, CheckpointEvery: time.Minute, SaveTimeout: 2 * time.Minute, Hibernations: 2, SnapshotSpools: 2, SnapshotMaxBytes: 1 << 30, SnapshotQuotaBytes: 4 << 30, SnapshotQuota: 50}
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
	fs.Var(secondsValue{&s.HibernateAfter}, "session-hibernate-after", "")
	add("session-hibernate-after", "a session without a cell for this long is saved as a snapshot and its interpreter ended, giving back its memory; its next call resumes it (0: never)")
	fs.Var(secondsValue{&s.CheckpointEvery}, "session-checkpoint-every", "")
	add("session-checkpoint-every", "after a cell, a session is saved in the background when this long passed since its last checkpoint; a node killed without warning loses only the cells since (0: never)")
	fs.Var(secondsValue{&s.SaveTimeout}, "session-save-timeout", "")
	add("session-save-timeout", "saving or loading one session's state (a snapshot, a hibernation, a resume) is interrupted past this")
	fs.IntVar(&s.Hibernations, "session-hibernations", s.Hibernations, "")
	add("session-hibernations", "sessions saved for hibernation at once")
	fs.IntVar(&s.SnapshotSpools, "snapshot-spools", s.SnapshotSpools, "")
	add("snapshot-spools", "snapshots this server reads from the store and verifies at once (restores, resumes)")
	fs.StringVar(&s.SnapshotKey, "snapshot-key", s.SnapshotKey, "")
	add("snapshot-key", "64 hexadecimal digits that authenticate sessions' snapshots, the same on every node of a fleet (default: the key made at the first start in DATA_DIR/snapshot.key)")
	fs.Var(sizeValue{&s.SnapshotMaxBytes}, "snapshot-max-bytes", "")
	add("snapshot-max-bytes", "size limit of one session snapshot (bytes, or with KiB/MiB/GiB)")
	fs.Var(sizeValue{&s.SnapshotQuotaBytes}, "snapshot-quota-bytes", "")
	add("snapshot-quota-bytes", "size of all the snapshots one API key keeps at most")
	fs.IntVar(&s.SnapshotQuota, "snapshot-quota", s.SnapshotQuota, "")
	add("snapshot-quota", "snapshots one API key keeps at most")
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
	if s.SnapshotKey != "" {
		if _, err := snapshot.ParseKey(s.SnapshotKey); err != nil {
			bad("PYEXEC_SNAPSHOT_KEY", "must be 64 hexadecimal digits")
		}
	}
	if s.SnapshotMaxBytes < 1<<20 || s.SnapshotQuotaBytes < s.SnapshotMaxBytes || s.SnapshotQuota < 1 {
		bad("PYEXEC_SNAPSHOT_MAX_BYTES", "must be at least 1 MiB and at most PYEXEC_SNAPSHOT_QUOTA_BYTES (%d), and PYEXEC_SNAPSHOT_QUOTA at least 1; got %d and %d",
			s.SnapshotQuotaBytes, s.SnapshotMaxBytes, s.SnapshotQuota)
	}
	if s.SaveTimeout < time.Second {
		bad("PYEXEC_SESSION_SAVE_TIMEOUT", "must be at least 1s, got %v", s.SaveTimeout)
	}
	if s.Hibernations < 1 || s.SnapshotSpools < 1 {
		bad("PYEXEC_SESSION_HIBERNATIONS", "must be at least 1 (and PYEXEC_SNAPSHOT_SPOOLS too), got %d and %d", s.Hibernations, s.SnapshotSpools)
	}
	if s.HibernateAfter < 0 {
		bad("PYEXEC_SESSION_HIBERNATE_AFTER", "must not be negative, got %v", s.HibernateAfter)
	}
	if s.CheckpointEvery < 0 {
		bad("PYEXEC_SESSION_CHECKPOINT_EVERY", "must not be negative, got %v", s.CheckpointEvery)
	}
	if s.MemoryMB < 4 {
		bad("PYEXEC_SESSION_MEMORY_MB", "must be at least 4, got %d", s.MemoryMB)
	}
}
