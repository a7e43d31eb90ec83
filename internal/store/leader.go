package store

import (
	"context"
	"fmt"
	"time"
)

// On a replicated store the reads a node acts on go to each asset's
// leader. JetStream creates KV buckets and object stores with direct
// gets, which any replica answers: right after node a records an
// execution and queues its job, node b, taking the job, could read the
// record or the request from a replica that has not applied the write
// yet, find nothing and drop the job. A leader's answer includes every
// acknowledged write.
//
// A handle decides once, when it is bound, whether it uses direct gets,
// from the asset's configuration then; a handle that does, fails ("no
// responders") once direct gets are turned off. So the store creates
// these assets with direct gets off on a replicated store (assets.go),
// and turns them off once on assets an earlier version created with them
// on, then binds its handles again.

// leaderReadStreams are the streams a replicated store reads from their
// leaders.
func leaderReadStreams() []string {
	return []string{"KV_" + RecordsBucket, "OBJ_" + RequestsBucket, "OBJ_" + ArtifactsBucket, "KV_" + SessionsBucket,
		"OBJ_" + SnapshotsBucket}
}

// directGets reports whether a new stream gets direct gets: on a single
// replica, where the leader answers them. A replicated store creates none:
// a direct get on a stream just created may find no replica answering yet
// ("no responders"), and some (leaderReadStreams) must read the leader.
func (s *NATS) directGets() bool { return s.cfg.Replicas == 1 }

// readFromLeaders turns direct gets off where they are on, waits until
// the leaders say so, and then binds the handles again.
func (s *NATS) readFromLeaders(ctx context.Context) error {
	if s.cfg.Replicas == 1 {
		return nil
	}
	changed := false
	for _, stream := range leaderReadStreams() {
		c, err := s.directOff(ctx, stream)
		if err != nil {
			return err
		}
		changed = changed || c
	}
	if !changed {
		return nil
	}
	var err error
	if s.records, err = s.js.KeyValue(ctx, RecordsBucket); err != nil {
		return err
	}
	if s.requests, err = s.js.ObjectStore(ctx, RequestsBucket); err != nil {
		return err
	}
	// A session created through one node is used through another at once.
	if s.sessions, err = s.js.KeyValue(ctx, SessionsBucket); err != nil {
		return err
	}
	// A snapshot stored through one node is restored through another.
	if s.snapshots, err = s.js.ObjectStore(ctx, SnapshotsBucket); err != nil {
		return err
	}
	s.artifacts, err = s.js.ObjectStore(ctx, ArtifactsBucket)
	return err
}

// directOff turns direct gets off on stream and returns once its leader
// reports them off, and whether they were on.
func (s *NATS) directOff(ctx context.Context, stream string) (bool, error) {
	changed := false
	for {
		st, err := s.js.Stream(ctx, stream)
		if err != nil {
			return changed, fmt.Errorf("reading stream %s: %w", stream, err)
		}
		cfg := st.CachedInfo().Config
		if !cfg.AllowDirect {
			return changed, nil
		}
		changed = true
		cfg.AllowDirect = false
		if _, err := s.js.UpdateStream(ctx, cfg); err != nil {
			return changed, fmt.Errorf("turning off direct gets on %s: %w", stream, err)
		}
		select {
		case <-ctx.Done():
			return changed, fmt.Errorf("turning off direct gets on %s: %w", stream, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
