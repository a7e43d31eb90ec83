package store

import (
	"context"
	"fmt"
)

// readFromLeaders makes the reads of the replicated assets that a node
// acts on go to each asset's leader. JetStream creates KV buckets and
// object stores with direct gets, which any replica answers: right after
// node a records an execution and queues its job, node b, taking the
// job, could read the record or the request from a replica that has not
// applied the write yet, find nothing and drop the job. A leader's answer
// includes every acknowledged write. The handles bound here keep reading
// from the leader even while another node, starting, briefly turns direct
// gets back on (CreateOrUpdate* does).
func (s *NATS) readFromLeaders(ctx context.Context) error {
	if s.cfg.Replicas == 1 {
		return nil // one replica: it is the leader
	}
	for _, stream := range []string{"KV_" + RecordsBucket, "OBJ_" + RequestsBucket, "OBJ_" + ArtifactsBucket, "KV_" + SessionsBucket} {
		st, err := s.js.Stream(ctx, stream)
		if err != nil {
			return fmt.Errorf("reading stream %s: %w", stream, err)
		}
		cfg := st.CachedInfo().Config
		if cfg.AllowDirect {
			cfg.AllowDirect = false
			if _, err := s.js.UpdateStream(ctx, cfg); err != nil {
				return fmt.Errorf("turning off direct gets on %s: %w", stream, err)
			}
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
	s.artifacts, err = s.js.ObjectStore(ctx, ArtifactsBucket)
	return err
}
