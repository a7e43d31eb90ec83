package store

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// MembersBucket holds one heartbeat entry per node; see Members.
const MembersBucket = "PYEXEC_NODES"

// MemberTTL is how long a heartbeat entry outlives its last write. A node
// writes its entry every few seconds, so only the entries of nodes that
// died (and that no survivor removed) expire. Survivors declare a silent
// node lost on their own clocks, with the default --node-lost-after
// before that; with a longer one the entry is gone first, and the claim
// creates the mark (engine claimExpired).
const MemberTTL = 30 * time.Second

var _ Members = (*NATS)(nil)

func (s *NATS) openMembers(ctx context.Context) (err error) {
	s.members, err = s.openKV(ctx, MembersBucket, "pyexec nodes' heartbeats", MemberTTL, -1)
	return err
}

// CreateMember writes name's entry unless a live one is there.
func (s *NATS) CreateMember(ctx context.Context, name string, value []byte) (uint64, error) {
	rev, err := s.members.Create(ctx, name, value)
	if err != nil {
		return 0, fmt.Errorf("store: creating node entry %s: %w", name, mapErr(err))
	}
	return rev, nil
}

// UpdateMember replaces name's entry if revision is its latest one.
func (s *NATS) UpdateMember(ctx context.Context, name string, value []byte, revision uint64) (uint64, error) {
	rev, err := s.members.Update(ctx, name, value, revision)
	if err != nil {
		return 0, fmt.Errorf("store: updating node entry %s: %w", name, mapErr(err))
	}
	return rev, nil
}

// PutMember writes name's entry.
func (s *NATS) PutMember(ctx context.Context, name string, value []byte) (uint64, error) {
	rev, err := s.members.Put(ctx, name, value)
	if err != nil {
		return 0, fmt.Errorf("store: writing node entry %s: %w", name, mapErr(err))
	}
	return rev, nil
}

// GetMember returns name's entry.
func (s *NATS) GetMember(ctx context.Context, name string) (Entry, error) {
	e, err := s.members.Get(ctx, name)
	if err != nil {
		return Entry{}, fmt.Errorf("store: reading node entry %s: %w", name, mapErr(err))
	}
	return Entry{Key: name, Value: e.Value(), Revision: e.Revision()}, nil
}

// RemoveMember deletes name's entry if revision is its latest one. The
// server checks the revision as it appends the delete marker, so two
// nodes removing the same entry cannot both succeed.
func (s *NATS) RemoveMember(ctx context.Context, name string, revision uint64) error {
	if err := s.members.Delete(ctx, name, jetstream.LastRevision(revision)); err != nil {
		return fmt.Errorf("store: removing node entry %s: %w", name, mapErr(err))
	}
	return nil
}

// WatchMembers follows the bucket until ctx ends.
func (s *NATS) WatchMembers(ctx context.Context) (<-chan MemberEvent, error) {
	w, err := s.members.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: watching node entries: %w", mapErr(err))
	}
	out := make(chan MemberEvent, 16)
	go func() {
		defer close(out)
		// Stopping only unsubscribes; the watch ends with ctx either way.
		defer func() { _ = w.Stop() }()
		for {
			var ev MemberEvent
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil {
					ev.Synced = true
				} else {
					ev.Entry = Entry{Key: e.Key(), Value: e.Value(), Revision: e.Revision()}
					ev.Deleted = e.Operation() != jetstream.KeyValuePut
				}
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}
