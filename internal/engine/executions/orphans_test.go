package executions

import (
	"context"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/engine/runtest"
	"github.com/pyexec/pyexec/internal/store"
)

// TestOrphanSweepSettlesWhatNothingOwns: records that say running or
// pending on this node while none of its executions owns them (a start
// or a creation the store stored but did not confirm) end failed,
// node_lost, while this node runs; an execution it runs, and a record of
// another node, are left as they are.
func TestOrphanSweepSettlesWhatNothingOwns(t *testing.T) {
	e := start(t, t.TempDir(), nodeConfig{exec: Config{OrphanSweep: 50 * time.Millisecond}}, nil)
	ctx := context.Background()
	live, err := e.eng.Submit(ctx, runtest.Script("block"))
	if err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "the execution to run", func() bool { return statusOf(t, e.eng, live) == run.StatusRunning })

	record := func(status run.Status, node string) string {
		t.Helper()
		id, err := newID()
		if err != nil {
			t.Fatal(err)
		}
		req := runtest.Script("print:never")
		p, err := e.eng.planner.Prepare(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		r := newRecord(id, req, p, false)
		r.Status, r.Node = status, node
		if status == run.StatusRunning {
			r.StartedAt = ptr(run.Now())
		}
		if err := e.eng.create(ctx, r); err != nil {
			t.Fatal(err)
		}
		return id
	}
	orphans := []string{record(run.StatusRunning, "local"), record(run.StatusPending, "local")}
	other := record(run.StatusRunning, "other")
	for _, id := range orphans {
		x := endOf(t, e, id)
		if x.Status != run.StatusFailed || x.Reason != run.ReasonNodeLost || x.Error != msgOrphaned || x.FinishedAt == nil {
			t.Errorf("%s: %s %s %q, want failed node_lost", id, x.Status, x.Reason, x.Error)
		}
	}
	time.Sleep(300 * time.Millisecond) // several more sweeps
	if st := statusOf(t, e.eng, live); st != run.StatusRunning {
		t.Errorf("the execution this node runs is %s, want running", st)
	}
	if st := statusOf(t, e.eng, other); st != run.StatusRunning {
		t.Errorf("another node's execution is %s, want running (left to that node, or to its loss)", st)
	}
	if st, err := e.eng.Kill(ctx, live); err != nil || st != run.StatusKilled {
		t.Fatalf("kill: %s %v", st, err)
	}
	if n := e.runner.Runs.Load(); n != 1 {
		t.Errorf("the runner ran %d payloads, want 1", n)
	}
}

// TestOrphanSweepReadsUnconfirmedCreations: a synchronous execution whose
// record was stored running although its creation timed out, and whose
// undoing failed too, is remembered and settled by the sweep, which reads
// it by id (such a record may have no index entry to list it by).
func TestOrphanSweepReadsUnconfirmedCreations(t *testing.T) {
	lost := &createLostStore{}
	lost.stuck.Store(true)
	e := startOver(t, nodeConfig{exec: Config{OrphanSweep: 50 * time.Millisecond}}, func(st *store.NATS) Store { lost.NATS = st; return lost })
	if x, err := e.eng.RunSync(context.Background(), runtest.Script("print:ran\n")); err == nil {
		t.Fatalf("RunSync succeeded (%s) with its record unconfirmed", x.Status)
	}
	id, _ := lost.created.Load().(string)
	if ids := e.eng.unconfirmedIDs(); len(ids) != 1 || ids[0] != id {
		t.Fatalf("remembered %v, want [%s]", ids, id)
	}
	lost.stuck.Store(false) // the store answers again
	x := endOf(t, e, id)
	if x.Status != run.StatusFailed || x.Reason != run.ReasonNodeLost || x.Error != msgOrphaned {
		t.Fatalf("%s %s %q, want failed node_lost", x.Status, x.Reason, x.Error)
	}
	if ids := e.eng.unconfirmedIDs(); len(ids) != 0 {
		t.Errorf("still remembered after it was settled: %v", ids)
	}
	if n := e.runner.Runs.Load(); n != 0 {
		t.Errorf("the payload ran %d times, want never", n)
	}
}
