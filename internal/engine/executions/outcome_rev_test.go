package executions

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/pyexec/pyexec/internal/engine/admission"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/engine/runtest"
	"github.com/pyexec/pyexec/internal/store"
)

// readCounter is the engine's store with its record reads counted.
type readCounter struct {
	Store
	gets atomic.Int64
}

func (s *readCounter) Get(ctx context.Context, key string) (store.Entry, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, key)
}

// startCounting is start (helpers_test.go) with the record reads counted.
func startCounting(t *testing.T, cfg nodeConfig) (*env, *readCounter) {
	t.Helper()
	var rc *readCounter
	e := startOver(t, cfg, func(st *store.NATS) Store { rc = &readCounter{Store: st}; return rc })
	return e, rc
}

// TestSyncOutcomeNeedsNoRead: a synchronous execution that starts at once
// creates its record running and writes its outcome over it at the
// revision it created: no record is read on the request's path, and the
// stored record is final with the run's output.
func TestSyncOutcomeNeedsNoRead(t *testing.T) {
	e, rc := startCounting(t, nodeConfig{})
	before := rc.gets.Load()
	x, err := e.eng.RunSync(context.Background(), runtest.Script("print:hello\n"))
	if err != nil {
		t.Fatal(err)
	}
	if n := rc.gets.Load() - before; n != 0 {
		t.Errorf("the synchronous path read records %d times, want 0", n)
	}
	got, err := getExec(context.Background(), e.eng, x.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != run.StatusCompleted || got.Stdout != "hello\n" || x.Stdout != "hello\n" {
		t.Fatalf("stored %s %q, answered %s %q", got.Status, got.Stdout, x.Status, x.Stdout)
	}
}

// TestSyncOutcomeYieldsToAnotherWriter: when someone else wrote the record
// while it ran (here: marked it killed, as a kill does when no node answers
// for it), the outcome's write at the old revision fails and the outcome
// is merged into what is stored, as before: the kill stands and the run's
// output is kept.
func TestSyncOutcomeYieldsToAnotherWriter(t *testing.T) {
	e, _ := startCounting(t, nodeConfig{})
	ctx := context.Background()
	done := make(chan *run.Execution, 1)
	go func() {
		x, err := e.eng.RunSync(ctx, runtest.Script("sleep:300ms"))
		if err != nil {
			t.Error(err)
		}
		done <- x
	}()
	var id string
	runtest.WaitFor(t, "the running record", func() bool {
		page, _, err := e.eng.List(ctx, ListOptions{Limit: 1, Owner: tester})
		if err != nil || len(page) == 0 || page[0].Status != run.StatusRunning {
			return false
		}
		id = page[0].ID
		return true
	})
	ent, err := e.st.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var r Record
	if err := json.Unmarshal(ent.Value, &r); err != nil {
		t.Fatal(err)
	}
	markKilled(&r, msgKilled)
	b, err := r.encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Update(ctx, id, b, ent.Revision, r.meta()); err != nil {
		t.Fatal(err)
	}
	x := <-done
	if x == nil {
		t.Fatal("no answer")
	}
	got, err := getExec(ctx, e.eng, id)
	if err != nil {
		t.Fatal(err)
	}
	if x.Status != run.StatusKilled || got.Status != run.StatusKilled {
		t.Fatalf("answered %s, stored %s; want the kill to stand", x.Status, got.Status)
	}
}

// TestQueuedSyncExecutionNeedsNoRead: a synchronous execution that waits
// for a slot is created pending, made running and made final at the
// revisions this engine wrote: no record is read on its path either, and
// it ends with its output.
func TestQueuedSyncExecutionNeedsNoRead(t *testing.T) {
	e, rc := startCounting(t, nodeConfig{slots: admission.Config{Concurrency: 1, QueueSize: 4}})
	ctx := context.Background()
	before := rc.gets.Load()
	first := make(chan *run.Execution, 1)
	go func() {
		x, err := e.eng.RunSync(ctx, runtest.Script("sleep:300ms"))
		if err != nil {
			t.Error(err)
		}
		first <- x
	}()
	runtest.WaitFor(t, "the first to hold the slot", func() bool { return e.node.adm.Stats().Running == 1 })
	x, err := e.eng.RunSync(ctx, runtest.Script("print:queued\n"))
	if err != nil {
		t.Fatal(err)
	}
	if f := <-first; f == nil || !f.Status.Final() {
		t.Fatalf("the first: %+v", f)
	}
	if n := rc.gets.Load() - before; n != 0 {
		t.Errorf("the synchronous paths read records %d times, want 0", n)
	}
	got, err := getExec(ctx, e.eng, x.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != run.StatusCompleted || got.Stdout != "queued\n" || x.Stdout != "queued\n" || got.StartedAt == nil {
		t.Fatalf("stored %s %q (started %v), answered %s %q", got.Status, got.Stdout, got.StartedAt, x.Status, x.Stdout)
	}
}

// TestTransitionFromAStaleRecordReadsTheLatest: a change made from the
// record as this engine wrote it, when someone wrote it since (here: a
// kill of the pending execution), is not written over theirs: the latest
// version is read and the change applied to it, which refuses a killed
// record, and what is returned is the record as stored.
func TestTransitionFromAStaleRecordReadsTheLatest(t *testing.T) {
	e, _ := startCounting(t, nodeConfig{})
	ctx := context.Background()
	id, err := newID()
	if err != nil {
		t.Fatal(err)
	}
	r := newRecord(id, runtest.Script("print:x\n"), &run.Plan{}, false)
	if err := e.eng.create(ctx, r); err != nil {
		t.Fatal(err)
	}
	_, ok, err := e.eng.transition(ctx, id, func(cur *Record) bool {
		markKilled(cur, msgKilledQueued)
		return true
	})
	if err != nil || !ok {
		t.Fatalf("the kill: %v %v", ok, err)
	}
	toRunning := func(cur *Record) bool {
		if cur.Status != run.StatusPending {
			return false
		}
		cur.Status = run.StatusRunning
		return true
	}
	got, ok, err := e.eng.transitionFrom(ctx, id, r, toRunning)
	if err != nil || ok || got.Status != run.StatusKilled {
		t.Fatalf("from the stale record: status %s written %v err %v, want the kill to stand", got.Status, ok, err)
	}
}
