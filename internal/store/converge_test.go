package store

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// checkConverged: every store reads what every other wrote, records and
// request payloads, and the assets read from their leaders have direct
// gets off: no node holds a handle that another node's start broke.
func checkConverged(t *testing.T, stores []*NATS) {
	t.Helper()
	ctx := context.Background()
	for _, name := range leaderReadStreams() {
		st, err := stores[0].js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if cfg := st.CachedInfo().Config; cfg.AllowDirect || cfg.Replicas != 3 {
			t.Errorf("%s: direct gets %v, replicas %d; want reads from the leader of 3 replicas", name, cfg.AllowDirect, cfg.Replicas)
		}
	}
	for i, w := range stores {
		id := fmt.Sprintf("exe_%d", i)
		if _, err := w.Create(ctx, id, []byte("by "+id), Meta{Status: "pending"}); err != nil {
			t.Fatalf("node %d writing: %v", i, err)
		}
		if err := w.PutRequest(ctx, id, []byte("request "+id)); err != nil {
			t.Fatalf("node %d storing a request: %v", i, err)
		}
	}
	for i, r := range stores {
		for j := range stores {
			id := fmt.Sprintf("exe_%d", j)
			if e, err := r.Get(ctx, id); err != nil || string(e.Value) != "by "+id {
				t.Errorf("node %d reading what node %d wrote: %v %q", i, j, err, e.Value)
			}
			if b, err := r.GetRequest(ctx, id); err != nil || string(b) != "request "+id {
				t.Errorf("node %d reading node %d's request: %v %q", i, j, err, b)
			}
		}
	}
}

// TestConcurrentOpensConverge: three nodes open the store at the same
// moment on a cluster that has just started (no JetStream leader yet, no
// asset): they wait for the cluster, create the same assets at once, and
// all end up on the same assets, each reading what the others write.
func TestConcurrentOpensConverge(t *testing.T) {
	t.Parallel() // its own cluster; mostly waiting for it (see newTestCluster)
	c := newTestCluster(t, 3, 0)
	c.start()
	var waits atomic.Int32
	stores := openAllQuiet(t, c.urls, func(string) { waits.Add(1) })
	if stores == nil {
		t.FailNow()
	}
	checkConverged(t, stores)
	t.Logf("%d failed attempts while the cluster formed", waits.Load())
}

// TestOpenWaitsForTheServers: nodes started before any NATS server wait
// for them, telling what they wait for, and converge once the servers
// come up.
func TestOpenWaitsForTheServers(t *testing.T) {
	t.Parallel() // its own cluster; mostly waiting for it (see newTestCluster)
	c := newTestCluster(t, 3, 0)
	var waits atomic.Int32
	var firstWait atomic.Value
	opened := make(chan []*NATS, 1)
	go func() {
		opened <- openAllQuiet(t, c.urls, func(what string) {
			if waits.Add(1) == 1 {
				firstWait.Store(what)
			}
		})
	}()
	for waits.Load() < 3 { // every node found nothing listening, at least once
		time.Sleep(20 * time.Millisecond)
	}
	if what, _ := firstWait.Load().(string); !strings.Contains(what, "connecting to NATS at nats://127.0.0.1") {
		t.Errorf("the first wait was for %q, want the connection", what)
	}
	c.start()
	select {
	case stores := <-opened:
		if stores == nil {
			t.FailNow()
		}
		checkConverged(t, stores)
	case <-time.After(4 * time.Minute):
		t.Fatal("the nodes did not open the store within 4 minutes of the servers' start")
	}
}

// openAllQuiet opens a store with three replicas through each of urls at
// once, telling waited about every failed attempt; it reports failures
// with Errorf (it runs in its own goroutine) and returns nil then.
func openAllQuiet(t *testing.T, urls []string, waited func(what string)) []*NATS {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	wait := func(what string, _ error, _ time.Duration) { waited(what) }
	stores := make([]*NATS, len(urls))
	var wg sync.WaitGroup
	var failed atomic.Bool
	for i, url := range urls {
		wg.Go(func() {
			c, err := ConnectCluster(ctx, ClusterOptions{URLs: []string{url}, Node: fmt.Sprint("n", i), OnWait: wait})
			if err != nil {
				t.Errorf("node %d: %v", i, err)
				failed.Store(true)
				return
			}
			t.Cleanup(func() { _ = c.Close() })
			if stores[i], err = Open(ctx, c.Conn(), Config{Replicas: 3}, OnWait(wait)); err != nil {
				t.Errorf("node %d: %v", i, err)
				failed.Store(true)
			}
		})
	}
	wg.Wait()
	if failed.Load() {
		return nil
	}
	return stores
}

// TestAssetsHaveNatsGoLayout: the store creates KV buckets and object
// stores itself (to create them with direct gets off); what it creates
// is configured as nats.go would have, so nats.go's handles work on them.
func TestAssetsHaveNatsGoLayout(t *testing.T) {
	s, _ := open(t, t.TempDir(), Config{})
	ctx := context.Background()
	if _, err := s.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "THEIRS", History: 1, TTL: time.Hour,
		MaxValueSize: 4096, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.openKV(ctx, "OURS", "", time.Hour, 4096); err != nil {
		t.Fatal(err)
	}
	if _, err := s.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "THEIRS", TTL: time.Hour,
		Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.openObjects(ctx, "OURS", "", time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"KV_", "OBJ_"} {
		theirs, ours := streamConfig(t, s, kind+"THEIRS"), streamConfig(t, s, kind+"OURS")
		ours.Name, ours.Subjects = theirs.Name, theirs.Subjects
		if !reflect.DeepEqual(theirs, ours) {
			t.Errorf("%s bucket:\nnats.go makes %+v\nthe store made %+v", kind, theirs, ours)
		}
	}
	kv, err := s.js.KeyValue(ctx, "OURS")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(ctx, "k"); err != nil || string(e.Value()) != "v" {
		t.Fatalf("reading through nats.go's handle: %v", err)
	}
}

func streamConfig(t *testing.T, s *NATS, name string) jetstream.StreamConfig {
	t.Helper()
	st, err := s.js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.Metadata = nil // the server's version stamps
	return cfg
}

// TestOpenUpdatesWhatItOwns: a node started with another TTL updates the
// existing assets (the last node started sets them), and leaves a second
// open with the same settings alone.
func TestOpenUpdatesWhatItOwns(t *testing.T) {
	dir := t.TempDir()
	s, emb := open(t, dir, Config{TTL: time.Hour})
	ctx := context.Background()
	if _, err := Open(ctx, emb.Conn(), Config{TTL: 2 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"KV_" + RecordsBucket, "OBJ_" + RequestsBucket, EventsStream, QueueStream} {
		if got := streamConfig(t, s, name).MaxAge; got != 2*time.Hour {
			t.Errorf("%s max age %v after a node with a 2h TTL started, want 2h", name, got)
		}
	}
	if _, err := s.Create(ctx, "exe_1", []byte("v"), Meta{}); err != nil {
		t.Fatalf("the first node's handles after the second opened: %v", err)
	}
	// Below the 2-minute duplicate windows: they shrink with the age.
	if _, err := Open(ctx, emb.Conn(), Config{TTL: 30 * time.Second}); err != nil {
		t.Fatalf("a node with a 30s TTL: %v", err)
	}
	for _, name := range []string{"KV_" + RecordsBucket, EventsStream} {
		if cfg := streamConfig(t, s, name); cfg.MaxAge != 30*time.Second || cfg.Duplicates > 30*time.Second {
			t.Errorf("%s: max age %v, duplicate window %v after a node with a 30s TTL started", name, cfg.MaxAge, cfg.Duplicates)
		}
	}
}
