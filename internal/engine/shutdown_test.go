package engine

import (
	"context"
	"errors"
	"fmt"
	"github.com/pyexec/pyexec/internal/engine/runtest"
	"testing"
	"time"
)

// TestShutdownRecordsSyncExecutions: Close waits for running sync
// executions as for async ones; when its time is up it stops them, and it
// returns only once each has its final record (failed/node_lost), which
// its caller also gets.
func TestShutdownRecordsSyncExecutions(t *testing.T) {
	e := start(t, t.TempDir(), Config{}, nil)
	ctx := context.Background()
	type result struct {
		x   *Execution
		err error
	}
	got := make(chan result, 1)
	go func() {
		x, err := e.eng.RunSync(ctx, script("block"))
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
	if _, err := e.eng.RunSync(ctx, script("print:late")); !errors.Is(err, ErrClosed) {
		t.Errorf("RunSync after Close = %v, want ErrClosed", err)
	}
}

// TestShutdownNeverStopsAnExecutionAsItStarts: an execution is either
// stopped by Close before it begins (it must then not begin: an async job
// goes back to the queue) or, once it began, left to the drain.
func TestShutdownNeverStopsAnExecutionAsItStarts(t *testing.T) {
	e := start(t, t.TempDir(), Config{}, nil)
	tests := []struct {
		name        string
		beginFirst  bool
		wantBegin   bool
		wantStopped bool
	}{
		{name: "stopped while waiting: it does not begin", beginFirst: false, wantBegin: false, wantStopped: true},
		{name: "begun: Close leaves it to the drain", beginFirst: true, wantBegin: true, wantStopped: false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			o, err := e.eng.own(fmt.Sprintf("exe_shutdown_%d", i), cancel)
			if err != nil {
				t.Fatal(err)
			}
			defer o.release(StatusCompleted)
			began := false
			if tt.beginFirst {
				began = o.begin()
			}
			e.eng.mu.Lock()
			o.stopUnstarted()
			e.eng.mu.Unlock()
			if !tt.beginFirst {
				began = o.begin()
			}
			if began != tt.wantBegin {
				t.Errorf("begin = %v, want %v", began, tt.wantBegin)
			}
			if stopped := errors.Is(context.Cause(ctx), errShutdown); stopped != tt.wantStopped {
				t.Errorf("stopped by the shutdown = %v, want %v", stopped, tt.wantStopped)
			}
		})
	}
}
