package executions

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine/admission"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/engine/runtest"
)

// TestRestartMarksInFlightNodeLost simulates a crash: the store goes away
// under a running execution, the engine is abandoned, and a new engine on
// the same data directory must report the execution as lost.
func TestRestartMarksInFlightNodeLost(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	first := start(t, dir, nodeConfig{}, nil)
	id, err := first.eng.Submit(ctx, runtest.Script("block"))
	if err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "the execution to run", func() bool { return statusOf(t, first.eng, id) == run.StatusRunning })
	first.crash(t)

	second := start(t, dir, nodeConfig{}, nil)
	x, err := getExec(ctx, second.eng, id)
	if err != nil {
		t.Fatal(err)
	}
	if x.Status != run.StatusFailed || x.Reason != run.ReasonNodeLost || x.Error != msgNodeLost || x.FinishedAt == nil {
		t.Errorf("after restart: status %s reason %q error %q; want failed node_lost", x.Status, x.Reason, x.Error)
	}
	ch, err := follow(ctx, second.eng, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var last Event
	for ev := range ch {
		last = ev
	}
	if last.Type != EventStatus || last.Data != string(run.StatusFailed) {
		t.Errorf("last event after restart = %+v, want status failed", last)
	}
}

// TestRestartRunsQueuedJobs checks the recovery choice for async jobs that
// never started: they run after the restart, including one whose queue
// message was lost.
func TestRestartRunsQueuedJobs(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	first := start(t, dir, nodeConfig{slots: admission.Config{Concurrency: 1}}, nil)
	blocker, err := first.eng.Submit(ctx, runtest.Script("block"))
	if err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "the blocker to run", func() bool { return statusOf(t, first.eng, blocker) == run.StatusRunning })
	queued, err := first.eng.Submit(ctx, runtest.Script("print:after restart"))
	if err != nil {
		t.Fatal(err)
	}
	// A job whose record and request were stored but whose queue message
	// never made it (the node died in between).
	orphan, err := newID()
	if err != nil {
		t.Fatal(err)
	}
	req := runtest.Script("print:orphan")
	p, err := first.eng.planner.Prepare(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(req)
	if err := first.st.PutRequest(ctx, orphan, body); err != nil {
		t.Fatal(err)
	}
	if err := first.eng.create(ctx, newRecord(orphan, req, p, true)); err != nil {
		t.Fatal(err)
	}
	first.crash(t)

	second := start(t, dir, nodeConfig{}, nil)
	if st := statusOf(t, second.eng, blocker); st != run.StatusFailed {
		t.Errorf("running execution after restart is %s, want failed", st)
	}
	for _, tc := range []struct{ id, stdout string }{{queued, "after restart"}, {orphan, "orphan"}} {
		runtest.WaitFor(t, "the queued job to run", func() bool { return statusOf(t, second.eng, tc.id) == run.StatusCompleted })
		x, _ := getExec(ctx, second.eng, tc.id)
		if x.Stdout != tc.stdout {
			t.Errorf("job %s stdout = %q, want %q", tc.id, x.Stdout, tc.stdout)
		}
	}
	runtest.WaitFor(t, "the queue to drain", func() bool {
		d, err := second.st.QueueDepth(ctx)
		return err == nil && d == 0
	})
	time.Sleep(100 * time.Millisecond) // a duplicate job would run now
	if n := second.runner.Runs.Load(); n != 2 {
		t.Errorf("runner ran %d times after restart, want 2", n)
	}
}
