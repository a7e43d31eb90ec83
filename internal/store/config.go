package store

import (
	"fmt"
	"time"
)

// Names of the JetStream assets. They are fixed so that every node of a
// cluster finds the same ones.
const (
	RecordsBucket  = "PYEXEC_EXECUTIONS"
	RequestsBucket = "PYEXEC_REQUESTS"
	QueueStream    = "PYEXEC_QUEUE"
	// QueuePrefix starts the subject of each key's jobs; QueueToken ends it.
	QueuePrefix = "pyexec.queue."
	// LegacyQueueSubject and LegacyQueueConsumer are the single queue of
	// earlier versions, migrated by Open (queue_migrate.go).
	LegacyQueueSubject  = "pyexec.queue"
	LegacyQueueConsumer = "pyexec-workers"
	queueConsumerPrefix = "pyexec-q-"
	EventsStream        = "PYEXEC_EVENTS"
	EventsPrefix        = "pyexec.events."
	ControlPrefix       = "pyexec.control."
	AuditStream         = "PYEXEC_AUDIT"
	AuditSubject        = "pyexec.audit"
)

// Config tunes the JetStream assets Open creates or updates.
type Config struct {
	// TTL is how long execution records, requests and events are kept
	// after their last write. Zero means 24h.
	TTL time.Duration
	// AuditMaxAge is how long audit records are kept. Zero means 90 days.
	AuditMaxAge time.Duration
	// MaxRecordBytes caps one execution record. Zero means 8 MiB; it must
	// not exceed the server's max_payload.
	MaxRecordBytes int32
	// Replicas is the replication factor of every asset. Zero means 1
	// (the embedded server); a cluster would use 3.
	Replicas int
	// AckWait is how long a fetched queue job stays invisible to other
	// workers before it is redelivered unless the worker reports progress.
	// Zero means 30s.
	AckWait time.Duration
	// SessionTTL is how long a session's registry entry is kept after its
	// last write; it must exceed the longest session life. Zero means
	// DefaultSessionTTL.
	SessionTTL time.Duration
}

// DefaultTTL is the default retention of records, requests and events.
const DefaultTTL = 24 * time.Hour

func (c Config) withDefaults() Config {
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.AuditMaxAge == 0 {
		c.AuditMaxAge = 90 * 24 * time.Hour
	}
	if c.MaxRecordBytes == 0 {
		c.MaxRecordBytes = 8 << 20
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.AckWait == 0 {
		c.AckWait = 30 * time.Second
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.TTL < time.Second:
		return fmt.Errorf("store: record TTL %s is shorter than 1s", c.TTL)
	case c.AuditMaxAge < time.Second:
		return fmt.Errorf("store: audit max age %s is shorter than 1s", c.AuditMaxAge)
	case c.MaxRecordBytes < 64<<10:
		return fmt.Errorf("store: max record size %d is below 64 KiB", c.MaxRecordBytes)
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("store: replicas %d out of range 1..5", c.Replicas)
	case c.AckWait < time.Second:
		return fmt.Errorf("store: ack wait %s is shorter than 1s", c.AckWait)
	case c.SessionTTL < time.Second:
		return fmt.Errorf("store: session registry TTL %s is shorter than 1s", c.SessionTTL)
	}
	return nil
}
