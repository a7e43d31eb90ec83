package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Every node of a fleet creates the assets it needs when it opens the
// store, and nodes usually start together (three replicas of a
// Deployment, three units at boot). So an asset may be created by
// several nodes at once: each looks for it, creates it when it is not
// there, and takes "already exists" as news that another node was
// faster, whereupon it looks again. JetStream answers a create of an
// existing stream with the same configuration with success, and every
// node asks for the same one; only the settings a node owns (subjects,
// age, replicas, size limits) are updated when they differ from what is
// there, which is how a changed --record-ttl or --nats-replicas reaches a
// running fleet.
//
// KV buckets and object stores are created as streams in the layout
// nats.go gives them (ADR-8 and ADR-20), so that on a replicated store
// they are born with direct gets off (leader.go): nats.go's own create
// would turn them on, and on again whenever it finds one that another
// node turned off, under the feet of nodes that already bound to it.

// asset is one stream of the store as this node would create it.
type asset struct {
	cfg jetstream.StreamConfig
}

// ensure makes the stream of a exist with the settings this node owns
// and returns it.
func (s *NATS) ensure(ctx context.Context, a asset) (jetstream.Stream, error) {
	for {
		st, err := s.js.Stream(ctx, a.cfg.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			st, err = s.js.CreateStream(ctx, a.cfg)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				continue // created meanwhile by another node: look again
			}
			return st, err
		}
		if err != nil {
			return nil, err
		}
		if want, changed := a.update(st.CachedInfo().Config); changed {
			return s.js.UpdateStream(ctx, want)
		}
		return st, nil
	}
}

// update returns cur with the settings a owns, and whether any differed.
// Direct gets are left as they are: readFromLeaders turns them off where
// an earlier version left them on.
func (a asset) update(cur jetstream.StreamConfig) (jetstream.StreamConfig, bool) {
	want := cur
	want.Subjects = a.cfg.Subjects
	want.MaxAge = a.cfg.MaxAge
	want.Replicas = a.cfg.Replicas
	want.MaxMsgSize = a.cfg.MaxMsgSize
	// A KV bucket's duplicate window follows its TTL; for the others 0
	// lets the server fit its default to the (new) age.
	want.Duplicates = a.cfg.Duplicates
	changed := !slices.Equal(cur.Subjects, want.Subjects) || cur.MaxAge != want.MaxAge ||
		cur.Replicas != want.Replicas || cur.MaxMsgSize != want.MaxMsgSize ||
		(a.cfg.Duplicates != 0 && cur.Duplicates != a.cfg.Duplicates)
	return want, changed
}

// kvAsset is the stream of KV bucket with one value per key, as nats.go
// lays it out; maxValue is -1 for no limit.
func (s *NATS) kvAsset(bucket, description string, ttl time.Duration, maxValue int32) asset {
	// nats.go's duplicate window: 2 minutes, or the TTL when shorter.
	dup := 2 * time.Minute
	if ttl > 0 && ttl < dup {
		dup = ttl
	}
	return asset{jetstream.StreamConfig{
		Name:              "KV_" + bucket,
		Description:       description,
		Subjects:          []string{"$KV." + bucket + ".>"},
		MaxMsgsPerSubject: 1,
		MaxBytes:          -1,
		MaxAge:            ttl,
		MaxMsgSize:        maxValue,
		Storage:           jetstream.FileStorage,
		Replicas:          s.cfg.Replicas,
		AllowRollup:       true,
		DenyDelete:        true,
		Duplicates:        dup,
		MaxMsgs:           -1,
		MaxConsumers:      -1,
		AllowDirect:       s.directGets(),
		Discard:           jetstream.DiscardNew,
	}}
}

// objAsset is the stream of object store bucket, as nats.go lays it out.
func (s *NATS) objAsset(bucket, description string, ttl time.Duration) asset {
	return asset{jetstream.StreamConfig{
		Name:        "OBJ_" + bucket,
		Description: description,
		Subjects:    []string{"$O." + bucket + ".C.>", "$O." + bucket + ".M.>"},
		MaxAge:      ttl,
		MaxBytes:    -1,
		MaxMsgSize:  -1,
		Storage:     jetstream.FileStorage,
		Replicas:    s.cfg.Replicas,
		Discard:     jetstream.DiscardNew,
		AllowRollup: true,
		AllowDirect: s.directGets(),
	}}
}

// openKV ensures a KV bucket and binds to it.
func (s *NATS) openKV(ctx context.Context, bucket, description string, ttl time.Duration, maxValue int32) (jetstream.KeyValue, error) {
	if _, err := s.ensure(ctx, s.kvAsset(bucket, description, ttl, maxValue)); err != nil {
		return nil, err
	}
	return s.js.KeyValue(ctx, bucket)
}

// openObjects ensures an object store and binds to it.
func (s *NATS) openObjects(ctx context.Context, bucket, description string, ttl time.Duration) (jetstream.ObjectStore, error) {
	if _, err := s.ensure(ctx, s.objAsset(bucket, description, ttl)); err != nil {
		return nil, err
	}
	return s.js.ObjectStore(ctx, bucket)
}

// probeKey is a key no record, entry or object has: reading it tells
// whether a bucket answers.
const probeKey = "pyexec-probe"

// probeReads reads from every bucket until each answers (with "not
// found"): a stream just created in a forming cluster may not answer at
// once, and the engine reads them as soon as Open returns.
func (s *NATS) probeReads(ctx context.Context) error {
	for _, kv := range []jetstream.KeyValue{s.records, s.indexKV, s.members, s.sessions} {
		if _, err := kv.Get(ctx, probeKey); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("reading bucket %s: %w", kv.Bucket(), err)
		}
	}
	for name, obs := range map[string]jetstream.ObjectStore{RequestsBucket: s.requests, ArtifactsBucket: s.artifacts, SnapshotsBucket: s.snapshots} {
		if _, err := obs.GetInfo(ctx, probeKey); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			return fmt.Errorf("reading object store %s: %w", name, err)
		}
	}
	if _, err := s.LastEvent(ctx, probeKey); err != nil {
		return err
	}
	return nil
}
