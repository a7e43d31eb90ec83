package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// hasLegacyQueue reports whether the queue stream still takes the single
// subject of earlier versions.
func (s *NATS) hasLegacyQueue(ctx context.Context) (bool, error) {
	st, err := s.js.Stream(ctx, QueueStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return slices.Contains(st.CachedInfo().Config.Subjects, LegacyQueueSubject), nil
}

// MigrateQueue moves the jobs of the single queue of earlier versions to
// their keys' subjects, then stops accepting the old subject, and returns
// how many it moved; it does nothing on a queue already migrated. Call it
// once the index has an entry for every record (after Reindex) and before
// taking jobs. The old unfiltered consumer goes first: it overlaps every
// key's consumer, which a work-queue stream refuses. A job's key is the
// owner in its record's index entry; a job without one (its record is
// gone) goes to the empty key's queue, where the worker that takes it
// finds nothing to run.
//
// Several nodes migrating at once may move one job twice; the copy finds
// the execution started (only one worker moves a record from pending to
// running) and is dropped.
func (s *NATS) MigrateQueue(ctx context.Context) (int, error) {
	if !s.legacyQueue {
		return 0, nil
	}
	if err := s.queue.DeleteConsumer(ctx, LegacyQueueConsumer); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return 0, fmt.Errorf("store: removing the legacy queue consumer: %w", err)
	}
	n := 0
	err := s.eachQueued(ctx, func(msg *jetstream.RawStreamMsg) error {
		if msg.Subject != LegacyQueueSubject {
			return nil
		}
		id := string(msg.Data)
		if err := s.Enqueue(ctx, s.index.owner(id), id); err != nil {
			return err
		}
		if err := s.queue.DeleteMsg(ctx, msg.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("removing legacy job %d: %w", msg.Sequence, err)
		}
		n++
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("store: migrating legacy jobs: %w", err)
	}
	cfg := s.queue.CachedInfo().Config
	cfg.Subjects = []string{QueuePrefix + ">"}
	st, err := s.js.UpdateStream(ctx, cfg)
	if err != nil {
		return n, fmt.Errorf("store: retiring the legacy queue subject: %w", err)
	}
	s.queue = st
	s.legacyQueue = false
	return n, nil
}
