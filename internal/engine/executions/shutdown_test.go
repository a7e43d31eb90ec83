package executions

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/pyexec/pyexec/internal/engine/run"
)

// TestShutdownNeverStopsAnExecutionAsItStarts: an execution is either
// stopped by Close before it begins (it must then not begin: an async job
// goes back to the queue) or, once it began, left to the drain.
func TestShutdownNeverStopsAnExecutionAsItStarts(t *testing.T) {
	e := start(t, t.TempDir(), nodeConfig{}, nil)
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
			defer o.release(run.StatusCompleted)
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
