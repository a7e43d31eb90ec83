package store

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestOpenBucketWaitsForTheCluster: a bucket another package keeps on the
// store (the workspaces') opens like the store's own. Asked for while the
// cluster has lost its majority, OpenBucket waits, past JetStream's own
// 5 s request timeout, until the servers are back instead of failing with
// "context deadline exceeded"; nodes opening it at once all get it, with
// the store's replicas and reads from the leader, and what one writes the
// others read at once.
func TestOpenBucketWaitsForTheCluster(t *testing.T) {
	t.Parallel() // its own cluster; mostly waiting for it (see newTestCluster)
	c := newTestCluster(t, 3, EmbeddedMaxPayload)
	c.start()
	nodes := []*NATS{openOn(t, c.urls[0]), openOn(t, c.urls[0]), openOn(t, c.urls[0])}
	c.stopServer(1)
	c.stopServer(2)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	kvs := make([]jetstream.KeyValue, len(nodes))
	objs := make([]jetstream.ObjectStore, len(nodes))
	errs := make([]error, 2*len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { kvs[i], errs[2*i] = n.OpenBucket(ctx, "TEST_RECORDS", "test records") })
		wg.Go(func() { objs[i], errs[2*i+1] = n.OpenObjectBucket(ctx, "TEST_BLOBS", "test blobs") })
	}
	time.Sleep(7 * time.Second) // longer than one JetStream request may take
	c.startServer(1)
	c.startServer(2)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("opening a bucket while the cluster recovers its majority: %v", err)
		}
	}
	for _, name := range []string{"KV_TEST_RECORDS", "OBJ_TEST_BLOBS"} {
		st, err := nodes[0].js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if cfg := st.CachedInfo().Config; cfg.AllowDirect || cfg.Replicas != 3 {
			t.Errorf("%s: direct gets %v, replicas %d; want reads from the leader of 3 replicas", name, cfg.AllowDirect, cfg.Replicas)
		}
	}
	if _, err := kvs[0].Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if e, err := kvs[2].Get(ctx, "k"); err != nil || string(e.Value()) != "v" {
		t.Errorf("a value written through one node, read through another: %v", err)
	}
	if _, err := objs[1].PutBytes(ctx, "o", []byte("blob")); err != nil {
		t.Fatal(err)
	}
	if b, err := objs[0].GetBytes(ctx, "o"); err != nil || string(b) != "blob" {
		t.Errorf("an object written through one node, read through another: %v %q", err, b)
	}
}

// TestOpenBucketTurnsDirectGetsOff: a bucket nats.go created (direct gets
// on, as an earlier version made the workspaces') is read from its leader
// once a replicated store opens it.
func TestOpenBucketTurnsDirectGetsOff(t *testing.T) {
	t.Parallel() // its own cluster; mostly waiting for it (see newTestCluster)
	urls := startCluster(t, 3)
	s := openOn(t, urls[0])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "OLD", Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	kv, err := s.OpenBucket(ctx, "OLD", "an old bucket")
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.js.Stream(ctx, "KV_OLD")
	if err != nil {
		t.Fatal(err)
	}
	if st.CachedInfo().Config.AllowDirect {
		t.Error("direct gets still on")
	}
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, "k"); err != nil {
		t.Errorf("reading through the handle OpenBucket bound: %v", err)
	}
}
