package store

import (
	"context"
	"errors"
	"fmt"

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
// connection stays owned by the caller.
func Open(ctx context.Context, nc *nats.Conn, cfg Config, opts ...Option) (*NATS, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if max := nc.MaxPayload(); max < int64(cfg.MaxRecordBytes) {
		return nil, fmt.Errorf("store: the server's max_payload %d is below the record size limit %d", max, cfg.MaxRecordBytes)
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
		{"records bucket", s.openRecords},
		{"index bucket", s.openIndex},
		{"requests bucket", s.openRequests},
		{"queue stream", s.openQueue},
		{"events stream", s.openEvents},
		{"audit stream", s.openAudit},
		{"artifacts bucket", s.openArtifacts},
		{"nodes bucket", s.openMembers},
		{"sessions bucket", s.openSessions},
		{"snapshots bucket", s.openSnapshots},
		{"read settings", s.readFromLeaders},
	}
	for _, step := range steps {
		if err := step.fn(ctx); err != nil {
			if tooFewPeers(err) {
				return nil, fmt.Errorf("store: creating %s with %d replicas: the JetStream cluster has fewer servers than that (set --nats-replicas to at most its size): %w",
					step.what, cfg.Replicas, err)
			}
			return nil, fmt.Errorf("store: creating %s: %w", step.what, err)
		}
	}
	return s, nil
}

func (s *NATS) openRecords(ctx context.Context) error {
	if s.settled(ctx, "KV_"+RecordsBucket, s.cfg.TTL, s.cfg.MaxRecordBytes) {
		kv, err := s.js.KeyValue(ctx, RecordsBucket)
		s.records = kv
		return err
	}
	kv, err := s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:       RecordsBucket,
		Description:  "pyexec execution records",
		History:      1,
		TTL:          s.cfg.TTL,
		MaxValueSize: s.cfg.MaxRecordBytes,
		Storage:      jetstream.FileStorage,
		Replicas:     s.cfg.Replicas,
	})
	s.records = kv
	return err
}

func (s *NATS) openRequests(ctx context.Context) error {
	if s.settled(ctx, "OBJ_"+RequestsBucket, s.cfg.TTL, -1) {
		obs, err := s.js.ObjectStore(ctx, RequestsBucket)
		s.requests = obs
		return err
	}
	obs, err := s.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      RequestsBucket,
		Description: "pyexec request payloads of queued executions",
		TTL:         s.cfg.TTL,
		Storage:     jetstream.FileStorage,
		Replicas:    s.cfg.Replicas,
	})
	s.requests = obs
	return err
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
	st, err := s.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        QueueStream,
		Description: "pyexec async executions waiting for a worker, one subject per key",
		Subjects:    subjects,
		Retention:   jetstream.WorkQueuePolicy,
		MaxAge:      s.cfg.TTL,
		Storage:     jetstream.FileStorage,
		Replicas:    s.cfg.Replicas,
	})
	if err != nil {
		return err
	}
	s.queue = st
	s.legacyQueue = legacy
	return nil
}

func (s *NATS) openEvents(ctx context.Context) error {
	st, err := s.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        EventsStream,
		Description: "pyexec live events of executions",
		Subjects:    []string{EventsPrefix + ">"},
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      s.cfg.TTL,
		Storage:     jetstream.FileStorage,
		Replicas:    s.cfg.Replicas,
	})
	s.events = st
	return err
}

func (s *NATS) openAudit(ctx context.Context) error {
	_, err := s.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        AuditStream,
		Description: "pyexec audit trail, one record per finished execution",
		Subjects:    []string{AuditSubject},
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      s.cfg.AuditMaxAge,
		Storage:     jetstream.FileStorage,
		Replicas:    s.cfg.Replicas,
	})
	return err
}

// tooFewPeers reports whether JetStream refused an asset because it cannot
// place as many replicas as asked: a cluster smaller than the replication
// factor, or a single server asked for more than one.
func tooFewPeers(err error) bool {
	var api *jetstream.APIError
	if !errors.As(err, &api) {
		return false
	}
	// The server's codes (nats-server's JSClusterNoPeersErrF,
	// JSInsufficientResourcesErr, JSStreamReplicasNotSupportedErr); the
	// client names none of them.
	switch api.ErrorCode {
	case 10005, 10023, 10074:
		return true
	}
	return false
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
