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
// responders") once direct gets are turned off. So direct gets are turned
// off once, when an asset is created or its configuration changes, and a
// node that finds an asset as it would make it binds to it without
// touching its configuration (CreateOrUpdate* would turn direct gets on
// again for a moment, under the other nodes' feet).

// settled reports whether stream exists as this node would create it,
// reads from the leader included, so that binding to it is enough.
// Its age limit is compared with ttl, maxMsgSize unless negative.
func (s *NATS) settled(ctx context.Context, stream string, ttl time.Duration, maxMsgSize int32) bool {
	if s.cfg.Replicas == 1 {
		return false // one replica: direct gets read the leader
	}
	st, err := s.js.Stream(ctx, stream)
	if err != nil {
		return false
	}
	c := st.CachedInfo().Config
	return !c.AllowDirect && c.Replicas == s.cfg.Replicas && c.MaxAge == ttl &&
		(maxMsgSize < 0 || c.MaxMsgSize == maxMsgSize)
}

// readFromLeaders turns direct gets off where they are on, waits until
// the leaders say so, and binds the handles again.
func (s *NATS) readFromLeaders(ctx context.Context) error {
	if s.cfg.Replicas == 1 {
		return nil
	}
	for _, stream := range []string{"KV_" + RecordsBucket, "OBJ_" + RequestsBucket, "OBJ_" + ArtifactsBucket, "KV_" + SessionsBucket,
		"OBJ_" + SnapshotsBucket} {
		if err := s.directOff(ctx, stream); err != nil {
			return err
		}
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
// reports them off.
func (s *NATS) directOff(ctx context.Context, stream string) error {
	for {
		st, err := s.js.Stream(ctx, stream)
		if err != nil {
			return fmt.Errorf("reading stream %s: %w", stream, err)
		}
		cfg := st.CachedInfo().Config
		if !cfg.AllowDirect {
			return nil
		}
		cfg.AllowDirect = false
		if _, err := s.js.UpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("turning off direct gets on %s: %w", stream, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("turning off direct gets on %s: %w", stream, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
