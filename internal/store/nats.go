package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATS implements every store interface on a JetStream connection.
type NATS struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	followJS jetstream.JetStream // followers' consumers (FollowersOn); js by default
	cfg      Config
	records  jetstream.KeyValue
	requests jetstream.ObjectStore
	queue    jetstream.Stream
	keys     keyQueue // consumers of the keys' queues (queue.go)
	// legacyQueue says the queue still takes the single subject of
	// earlier versions, until MigrateQueue (queue_migrate.go).
	legacyQueue bool
	events      jetstream.Stream
	// artifacts holds the files executions produce (artifacts.go).
	artifacts jetstream.ObjectStore
	// indexKV is the index of the records and index this node's copy of
	// it (index.go).
	indexKV jetstream.KeyValue
	index   *index
	// members holds the nodes' heartbeats (members.go).
	members jetstream.KeyValue
	// sessions is the fleet's session registry (sessions.go).
	sessions jetstream.KeyValue
	// snapshots holds sessions' snapshots (snapshots.go).
	snapshots jetstream.ObjectStore
	// onWait hears of Open's failed attempts (OnWait).
	onWait WaitFunc
}

var (
	_ Records  = (*NATS)(nil)
	_ Requests = (*NATS)(nil)
	_ Queue    = (*NATS)(nil)
	_ Events   = (*NATS)(nil)
	_ Control  = (*NATS)(nil)
	_ Audit    = (*NATS)(nil)
)

// Option changes how Open sets up a store.
type Option func(*NATS) error

// FollowersOn makes event followers read through nc rather than the
// store's main connection. Messages of one connection arrive in order, so
// on a shared connection the reply to a record write waits behind every
// event already sent to followers; with their own connection, followers
// can neither delay nor disconnect (as a slow consumer) the writes that
// record outcomes. The connection stays owned by the caller.
func FollowersOn(nc *nats.Conn) Option {
	return func(s *NATS) error {
		js, err := jetstream.New(nc)
		if err != nil {
			return fmt.Errorf("store: opening JetStream for followers: %w", err)
		}
		s.followJS = js
		return nil
	}
}

// Open creates or updates the JetStream assets pyexec uses and returns a
// store on them. nc may point at the embedded server or at a cluster; the
// connection stays owned by the caller. While JetStream cannot answer
// (a cluster forming, or without a majority of its servers), Open waits
// and retries, telling OnWait's function, until ctx ends.
func Open(ctx context.Context, nc *nats.Conn, cfg Config, opts ...Option) (*NATS, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if max := nc.MaxPayload(); max < MinMaxPayload {
		return nil, fmt.Errorf("store: the server's max_payload %d is below %d, the least the store works with (NATS's default, 1 MB, works; 8 MB is faster for large outputs, see docs/store.md)",
			max, MinMaxPayload)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("store: opening JetStream: %w", err)
	}
	s := &NATS{nc: nc, js: js, followJS: js, cfg: cfg, keys: keyQueue{consumers: make(map[string]jetstream.Consumer)}}
	for _, opt := range opts {
		if err := opt(s); err != nil {
			return nil, err
		}
	}
	steps := []struct {
		what string
		fn   func(context.Context) error
	}{
		{"creating the records bucket", s.openRecords},
		{"creating the index bucket", s.openIndex},
		{"creating the requests bucket", s.openRequests},
		{"creating the queue stream", s.openQueue},
		{"creating the events stream", s.openEvents},
		{"creating the audit stream", s.openAudit},
		{"creating the artifacts bucket", s.openArtifacts},
		{"creating the nodes bucket", s.openMembers},
		{"creating the sessions bucket", s.openSessions},
		{"creating the snapshots bucket", s.openSnapshots},
		{"setting reads from the leaders", s.readFromLeaders},
		{"reading the buckets", s.probeReads},
	}
	for _, step := range steps {
		if err := retry(ctx, step.what, s.onWait, s.explainOpen, step.fn); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
	}
	return s, nil
}

func (s *NATS) openRecords(ctx context.Context) (err error) {
	s.records, err = s.openKV(ctx, RecordsBucket, "pyexec execution records", s.cfg.TTL, s.cfg.MaxRecordBytes)
	return err
}

func (s *NATS) openRequests(ctx context.Context) (err error) {
	s.requests, err = s.openObjects(ctx, RequestsBucket, "pyexec request payloads of queued executions, and values too large for a message", s.cfg.TTL)
	return err
}

// stream is the configuration of a plain stream of the store.
func (s *NATS) stream(name, description string, subjects []string, retention jetstream.RetentionPolicy, maxAge time.Duration) asset {
	return asset{jetstream.StreamConfig{
		Name:        name,
		Description: description,
		Subjects:    subjects,
		Retention:   retention,
		MaxAge:      maxAge,
		MaxMsgSize:  -1,
		Storage:     jetstream.FileStorage,
		Replicas:    s.cfg.Replicas,
	}}
}

func (s *NATS) openQueue(ctx context.Context) error {
	subjects := []string{QueuePrefix + ">"}
	legacy, err := s.hasLegacyQueue(ctx)
	if err != nil {
		return err
	}
	if legacy {
		subjects = append(subjects, LegacyQueueSubject)
	}
	st, err := s.ensure(ctx, s.stream(QueueStream, "pyexec async executions waiting for a worker, one subject per key",
		subjects, jetstream.WorkQueuePolicy, s.cfg.TTL))
	if err != nil {
		return err
	}
	s.queue = st
	s.legacyQueue = legacy
	return nil
}

func (s *NATS) openEvents(ctx context.Context) (err error) {
	s.events, err = s.ensure(ctx, s.stream(EventsStream, "pyexec live events of executions",
		[]string{EventsPrefix + ">"}, jetstream.LimitsPolicy, s.cfg.TTL))
	return err
}

func (s *NATS) openAudit(ctx context.Context) error {
	_, err := s.ensure(ctx, s.stream(AuditStream, "pyexec audit trail, one record per finished execution",
		[]string{AuditSubject}, jetstream.LimitsPolicy, s.cfg.AuditMaxAge))
	return err
}

// JetStream exposes the underlying context, for tools that read the audit
// stream or inspect the assets.
func (s *NATS) JetStream() jetstream.JetStream { return s.js }

// mapErr turns JetStream errors into this package's sentinels.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrObjectNotFound),
		errors.Is(err, jetstream.ErrMsgNotFound):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return fmt.Errorf("%w: %w", ErrConflict, err)
	case errors.Is(err, jetstream.ErrKeyExists):
		return fmt.Errorf("%w: %w", ErrExists, err)
	case errors.Is(err, nats.ErrMaxPayload), errors.Is(err, jetstream.ErrStreamMessageExceedsMaximum):
		return fmt.Errorf("%w: %w", ErrTooLarge, err)
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, jetstream.ErrConnectionClosed):
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}
