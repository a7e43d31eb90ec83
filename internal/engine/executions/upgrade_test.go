package executions

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pyexec/pyexec/internal/engine/admission"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/engine/runtest"
	"github.com/pyexec/pyexec/internal/store"
)

// A data directory of an earlier version, with queued jobs on the single
// queue subject (one of them taken by a worker that died), an index entry
// without the async flag and a record older than the index, runs those
// jobs after the upgrade.
func TestUpgradeRunsLegacyQueuedJobs(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	first := start(t, dir, nodeConfig{slots: admission.Config{Concurrency: 1}}, nil)
	blocker, err := first.eng.Submit(ctx, runtest.Script("block"))
	if err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "the blocker to run", func() bool { return statusOf(t, first.eng, blocker) == run.StatusRunning })
	var queued []string
	for _, s := range []string{"print:one", "print:two"} {
		id, err := first.eng.Submit(ctx, runtest.Script(s))
		if err != nil {
			t.Fatal(err)
		}
		queued = append(queued, id)
	}
	first.crash(t)

	// Turn the data directory back into the earlier version's layout.
	emb, err := store.StartEmbedded(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, emb.Conn(), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	js := st.JetStream()
	if err := js.DeleteStream(ctx, store.QueueStream); err != nil {
		t.Fatal(err)
	}
	legacy, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: store.QueueStream, Subjects: []string{store.LegacyQueueSubject},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	workers, err := legacy.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: store.LegacyQueueConsumer,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range queued {
		if _, err := js.Publish(ctx, store.LegacyQueueSubject, []byte(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.SetMeta(ctx, queued[0], store.Meta{Status: string(run.StatusPending), Owner: tester}); err != nil {
		t.Fatal(err)
	}
	index, err := js.KeyValue(ctx, store.IndexBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := index.Purge(ctx, queued[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := workers.Next(jetstream.FetchMaxWait(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := emb.Close(); err != nil {
		t.Fatal(err)
	}

	second := start(t, dir, nodeConfig{}, nil)
	for _, id := range queued {
		runtest.WaitFor(t, "a legacy queued job to run", func() bool { return statusOf(t, second.eng, id) == run.StatusCompleted })
	}
	runtest.WaitFor(t, "the queue to drain", func() bool {
		d, err := second.st.QueueDepth(ctx)
		return err == nil && d == 0
	})
	if n := second.runner.Runs.Load(); n != 2 {
		t.Errorf("runner ran %d times after the upgrade, want 2", n)
	}
}
