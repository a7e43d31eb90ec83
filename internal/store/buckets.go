package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Buckets that other packages keep on the store (the workspaces' records
// and blobs) are opened the way Open opens the store's own: created as
// streams in nats.go's layout with this store's replicas (assets.go),
// with direct gets off on a replicated store so that reads go to the
// leader (leader.go), and retried while the cluster cannot answer yet
// (wait.go). Nodes of a fleet start together, so a bucket is often
// created by several of them at once on a cluster still settling.

// OpenBucket opens the KV bucket named bucket (one value per key, no
// age, no size limit per value), creating it when absent, and returns it
// once it answers a read.
func (s *NATS) OpenBucket(ctx context.Context, bucket, description string) (jetstream.KeyValue, error) {
	return openShared(ctx, s, "the bucket "+bucket, s.kvAsset(bucket, description, 0, -1),
		func(ctx context.Context) (jetstream.KeyValue, error) { return s.js.KeyValue(ctx, bucket) },
		func(ctx context.Context, kv jetstream.KeyValue) error {
			_, err := kv.Get(ctx, probeKey)
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				return nil
			}
			return err
		})
}

// OpenObjectBucket opens the object store named bucket (no age),
// creating it when absent, and returns it once it answers a read.
func (s *NATS) OpenObjectBucket(ctx context.Context, bucket, description string) (jetstream.ObjectStore, error) {
	return openShared(ctx, s, "the object store "+bucket, s.objAsset(bucket, description, 0),
		func(ctx context.Context) (jetstream.ObjectStore, error) { return s.js.ObjectStore(ctx, bucket) },
		func(ctx context.Context, obs jetstream.ObjectStore) error {
			_, err := obs.GetInfo(ctx, probeKey)
			if errors.Is(err, jetstream.ErrObjectNotFound) {
				return nil
			}
			return err
		})
}

// openShared ensures a, binds to it and reads from it (probe), retrying
// the whole while the cluster cannot answer.
func openShared[H any](ctx context.Context, s *NATS, what string, a asset,
	bind func(context.Context) (H, error), probe func(context.Context, H) error) (H, error) {
	var h H
	err := retry(ctx, "opening "+what, s.onWait, s.explainOpen, func(ctx context.Context) error {
		if err := s.leaderReads(ctx, a); err != nil {
			return err
		}
		b, err := bind(ctx)
		if err != nil {
			return err
		}
		if err := probe(ctx, b); err != nil {
			return fmt.Errorf("reading %s: %w", what, err)
		}
		h = b
		return nil
	})
	if err != nil {
		return h, fmt.Errorf("store: %w", err)
	}
	return h, nil
}

// leaderReads ensures a's stream and, on a replicated store, turns off
// the direct gets a stream made by nats.go's own create has, before any
// handle binds to it.
func (s *NATS) leaderReads(ctx context.Context, a asset) error {
	if _, err := s.ensure(ctx, a); err != nil {
		return err
	}
	if s.cfg.Replicas == 1 {
		return nil
	}
	_, err := s.directOff(ctx, a.cfg.Name)
	return err
}
