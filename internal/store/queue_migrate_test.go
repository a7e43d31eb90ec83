package store

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A data directory of an earlier version has one queue on one subject
// with one unfiltered consumer. Opening it moves every job, the one a
// worker held included, to its key's queue, and retires the old subject
// and consumer.
func TestQueueMigratesLegacyJobs(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, emb := open(t, dir, Config{})
	js := s.JetStream()
	if err := js.DeleteStream(ctx, QueueStream); err != nil {
		t.Fatal(err)
	}
	legacy, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: QueueStream, Subjects: []string{LegacyQueueSubject},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	workers, err := legacy.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: LegacyQueueConsumer,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	jobs := map[string]string{"exe_1": "a", "exe_2": "b", "exe_3": "a"}
	for _, id := range []string{"exe_1", "exe_2", "exe_3"} {
		if _, err := s.Create(ctx, id, []byte("{}"), Meta{Status: "pending", Owner: jobs[id]}); err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, LegacyQueueSubject, []byte(id)); err != nil {
			t.Fatal(err)
		}
	}
	// An old worker took the first job and died holding it.
	if _, err := workers.Next(jetstream.FetchMaxWait(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := emb.Close(); err != nil {
		t.Fatal(err)
	}

	s, _ = open(t, dir, Config{})
	if n, err := s.MigrateQueue(ctx); err != nil || n != 3 {
		t.Fatalf("MigrateQueue = %d, %v; want 3 jobs moved", n, err)
	}
	if n, err := s.MigrateQueue(ctx); err != nil || n != 0 {
		t.Errorf("MigrateQueue on a migrated queue = %d, %v; want 0", n, err)
	}
	info, err := s.queue.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(info.Config.Subjects, []string{QueuePrefix + ">"}) {
		t.Errorf("queue subjects after migration = %v, want only %s>", info.Config.Subjects, QueuePrefix)
	}
	if _, err := s.queue.Consumer(ctx, LegacyQueueConsumer); err == nil {
		t.Error("the legacy consumer survived the migration")
	}
	var got []string
	for _, key := range []string{"a", "b", "a", "b"} {
		job, err := s.TakeJob(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if job == nil {
			got = append(got, key+":-")
			continue
		}
		got = append(got, key+":"+job.ID())
		if err := job.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if want := "[a:exe_1 b:exe_2 a:exe_3 b:-]"; fmt.Sprint(got) != want {
		t.Errorf("jobs after migration = %v, want %s", got, want)
	}
	if d, err := s.QueueDepth(ctx); err != nil || d != 0 {
		t.Errorf("QueueDepth after taking every migrated job = %d, %v; want 0", d, err)
	}
}

// The tally counts records by status and owner from the index, and
// tells which owners have async records waiting.
func TestTallyCountsByStatusAndOwner(t *testing.T) {
	s, _ := open(t, t.TempDir(), Config{})
	ctx := context.Background()
	changed := s.IndexChanged()
	for id, m := range map[string]Meta{
		"exe_1": {Status: "pending", Owner: "b", Async: true},
		"exe_2": {Status: "pending", Owner: "a", Async: true},
		"exe_3": {Status: "pending", Owner: "a", Async: true},
		"exe_4": {Status: "pending", Owner: "c"},
		"exe_5": {Status: "running", Owner: "a"},
	} {
		if _, err := s.Create(ctx, id, []byte("{}"), m); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-changed:
	default:
		t.Error("IndexChanged did not fire on new entries")
	}
	owners, total := s.AsyncOwners("pending")
	if fmt.Sprint(owners) != "[a b]" || total != 3 {
		t.Errorf("AsyncOwners(pending) = %v, %d; want [a b], 3", owners, total)
	}
	if n := s.Count("pending", "a"); n != 2 {
		t.Errorf("Count(pending, a) = %d, want 2", n)
	}
	e, err := s.Get(ctx, "exe_2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "exe_2", []byte("{}"), e.Revision, Meta{Status: "running", Owner: "a"}); err != nil {
		t.Fatal(err)
	}
	if r, p := s.Count("running", "a"), s.Count("pending", "a"); r != 2 || p != 1 {
		t.Errorf("after a job of a starts: running %d pending %d, want 2 and 1", r, p)
	}
	if err := s.Delete(ctx, "exe_1"); err != nil {
		t.Fatal(err)
	}
	// The index follows the records' watch as well: an event of exe_1's
	// creation that arrives after its delete adds it back until the
	// delete's own event comes, so the tally settles rather than changes
	// at once.
	deadline := time.Now().Add(5 * time.Second)
	for {
		owners, total := s.AsyncOwners("pending")
		if fmt.Sprint(owners) == "[a]" && total == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("AsyncOwners 5s after b's job went = %v, %d; want [a], 1", owners, total)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
