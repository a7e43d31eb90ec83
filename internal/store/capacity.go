package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Capacity measures what the store holds and removes what eviction
// chooses. The audit stream is left out of both: it has a retention of its
// own and is never evicted.
type Capacity interface {
	// Usage is the bytes held by records, their index, events, request
	// payloads and artifacts.
	Usage(ctx context.Context) (int64, error)
	// OldestFinished returns up to n keys of records whose Meta is Final,
	// oldest first.
	OldestFinished(n int) []string
	// ForgetExpired drops what this node still holds of records that
	// expired; call it periodically.
	ForgetExpired()
	// PurgeEvents removes every event of id.
	PurgeEvents(ctx context.Context, id string) error
	// DeleteArtifacts removes the named files of id; missing ones are
	// skipped.
	DeleteArtifacts(ctx context.Context, id string, paths []string) error
}

var _ Capacity = (*NATS)(nil)

// Usage adds up the bytes of every evictable asset, as JetStream counts
// them (payloads plus per-message overhead).
func (s *NATS) Usage(ctx context.Context) (int64, error) {
	var total uint64
	for _, kv := range []jetstream.KeyValue{s.records, s.indexKV} {
		st, err := kv.Status(ctx)
		if err != nil {
			return 0, fmt.Errorf("store: measuring bucket %s: %w", kv.Bucket(), err)
		}
		total += st.Bytes()
	}
	for name, obs := range map[string]jetstream.ObjectStore{RequestsBucket: s.requests, ArtifactsBucket: s.artifacts} {
		st, err := obs.Status(ctx)
		if err != nil {
			return 0, fmt.Errorf("store: measuring object store %s: %w", name, err)
		}
		total += st.Size()
	}
	info, err := s.events.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: measuring events: %w", err)
	}
	total += info.State.Bytes
	return int64(total), nil
}

// OldestFinished reads this node's copy of the index.
func (s *NATS) OldestFinished(n int) []string {
	return s.index.oldest(selFinished, n)
}

// ForgetExpired drops the index entries of records the TTL removed: the
// bucket expires them without telling the watchers.
func (s *NATS) ForgetExpired() { s.index.pruneExpired() }

// PurgeEvents removes the events of id from the events stream, and the
// spilled data of those too large for a message.
func (s *NATS) PurgeEvents(ctx context.Context, id string) error {
	if err := s.dropSpilledEvents(ctx, id); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if err := s.events.Purge(ctx, jetstream.WithPurgeSubject(EventsPrefix+id)); err != nil {
		return fmt.Errorf("store: purging events of %s: %w", id, mapErr(err))
	}
	return nil
}

// DeleteArtifacts removes files of id by name, without listing the bucket.
func (s *NATS) DeleteArtifacts(ctx context.Context, id string, paths []string) error {
	for _, p := range paths {
		err := s.artifacts.Delete(ctx, artifactName(id, p))
		if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			return fmt.Errorf("store: deleting artifact %s of %s: %w", p, id, mapErr(err))
		}
	}
	return nil
}
