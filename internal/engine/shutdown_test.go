package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine/runtest"
)

// TestShutdownRecordsSyncExecutions: Close waits for running sync
// executions as for async ones; when its time is up it stops them, and it
// returns only once each has its final record (failed/node_lost), which
// its caller also gets.
func TestShutdownRecordsSyncExecutions(t *testing.T) {
	e := start(t, Config{})
	ctx := context.Background()
	type result struct {
		x   *Execution
		err error
	}
	got := make(chan result, 1)
	go func() {
		x, err := e.eng.RunSync(ctx, runtest.Script("block"))
		got <- result{x, err}
	}()
	var id string
	runtest.WaitFor(t, "the sync execution to run", func() bool {
		page, _, err := e.eng.List(ctx, ListOptions{Status: StatusRunning, AllOwners: true})
		if err != nil || len(page) != 1 {
			return false
		}
		id = page[0].ID
		return true
	})

	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	err := e.eng.Close(cctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want it to report the executions it stopped", err)
	}
	if waited := time.Since(t0); waited < 250*time.Millisecond {
		t.Errorf("Close returned after %s: it did not wait for the running sync execution", waited)
	}
	// Recorded before Close returned: the store is still open here.
	x, err := e.eng.Get(ctx, tester, id)
	if err != nil {
		t.Fatal(err)
	}
	if x.Status != StatusFailed || x.Reason != ReasonNodeLost || x.Stdout != "partial\n" {
		t.Errorf("record after Close: status %s reason %q stdout %q, want failed node_lost with its output", x.Status, x.Reason, x.Stdout)
	}
	select {
	case r := <-got:
		if r.err != nil || r.x.Status != StatusFailed || r.x.Reason != ReasonNodeLost {
			t.Errorf("RunSync at shutdown: %v %+v", r.err, r.x)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RunSync did not return after Close")
	}
	if _, err := e.eng.RunSync(ctx, runtest.Script("print:late")); !errors.Is(err, ErrClosed) {
		t.Errorf("RunSync after Close = %v, want ErrClosed", err)
	}
}
