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
	var kv jetstream.KeyValue
	err := retry(ctx, "opening the bucket "+bucket, s.onWait, s.explainOpen, func(ctx context.Context) error {
		a := s.kvAsset(bucket, description, 0, -1)
		if err := s.leaderReads(ctx, a); err != nil {
			return err
		}
		b, err := s.js.KeyValue(ctx, bucket)
		if err != nil {
			return err
		}
		if _, err := b.Get(ctx, probeKey); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("reading bucket %s: %w", bucket, err)
		}
		kv = b
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return kv, nil
}

// OpenObjectBucket opens the object store named bucket (no age),
// creating it when absent, and returns it once it answers a read.
func (s *NATS) OpenObjectBucket(ctx context.Context, bucket, description string) (jetstream.ObjectStore, error) {
	var obs jetstream.ObjectStore
	err := retry(ctx, "opening the object store "+bucket, s.onWait, s.explainOpen, func(ctx context.Context) error {
		a := s.objAsset(bucket, description, 0)
		if err := s.leaderReads(ctx, a); err != nil {
			return err
		}
		o, err := s.js.ObjectStore(ctx, bucket)
		if err != nil {
			return err
		}
		if _, err := o.GetInfo(ctx, probeKey); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			return fmt.Errorf("reading object store %s: %w", bucket, err)
		}
		obs = o
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return obs, nil
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
