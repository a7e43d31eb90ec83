package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// openOn opens a store with three replicas through url, retrying while
// the cluster elects its JetStream leader.
func openOn(t *testing.T, url string) *NATS {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := Open(ctx, nc, Config{Replicas: 3})
		cancel()
		if err == nil {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("Open on %s: %v", url, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestReplicatedReadsSeeEveryAcknowledgedWrite: what one node writes
// (a record, a request payload), another node connected to another
// server reads at once. A node taking a job from the queue must find the
// execution its job names, or it would drop the job.
func TestReplicatedReadsSeeEveryAcknowledgedWrite(t *testing.T) {
	urls := startCluster(t, 3)
	a, b := openOn(t, urls[0]), openOn(t, urls[2])
	ctx := context.Background()
	for _, name := range []string{"KV_" + RecordsBucket, "OBJ_" + RequestsBucket, "OBJ_" + ArtifactsBucket} {
		st, err := b.js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if cfg := st.CachedInfo().Config; cfg.AllowDirect || cfg.Replicas != 3 {
			t.Errorf("%s: direct gets %v, replicas %d; want reads from the leader of 3 replicas", name, cfg.AllowDirect, cfg.Replicas)
		}
	}
	for i := range 200 {
		id := fmt.Sprintf("exe_%d", i)
		if _, err := a.Create(ctx, id, []byte("pending"), Meta{Status: "pending"}); err != nil {
			t.Fatal(err)
		}
		if err := a.PutRequest(ctx, id, []byte("request "+id)); err != nil {
			t.Fatal(err)
		}
		if e, err := b.Get(ctx, id); err != nil || string(e.Value) != "pending" {
			t.Fatalf("record %s written through one server, read through another: %v %q", id, err, e.Value)
		}
		if body, err := b.GetRequest(ctx, id); err != nil || string(body) != "request "+id {
			t.Fatalf("request %s written through one server, read through another: %v %q", id, err, body)
		}
	}
	// A node that starts later (a restart) binds to the assets as they
	// are: the running nodes keep reading and writing.
	openOn(t, urls[1])
	if _, err := a.Get(ctx, "exe_0"); err != nil {
		t.Errorf("reading through a running node after another started: %v", err)
	}
	if err := b.PutRequest(ctx, "exe_late", []byte("late")); err != nil {
		t.Errorf("writing a request through a running node after another started: %v", err)
	}
}
