package fleet_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/engine/runtest"
	"github.com/pyexec/pyexec/internal/store"
)

// tester is the caller of the tests' executions.
var tester = engine.Caller{Name: runtest.Tester}

func statusOf(t *testing.T, eng *engine.Engine, id string) engine.Status {
	t.Helper()
	x, err := eng.Get(context.Background(), tester, id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return x.Status
}

// runningRecord writes the record of an execution of tester that node
// runs, as that node writes it when the execution starts, and returns
// its id.
func runningRecord(t *testing.T, st *store.NATS, node string) string {
	t.Helper()
	u, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	id := "exe_" + u.String()
	now := run.Now()
	type audit struct {
		Caller string `json:"caller"`
	}
	b, err := json.Marshal(struct {
		run.Execution
		Audit audit `json:"audit"`
	}{run.Execution{ID: id, Status: run.StatusRunning, Node: node, CreatedAt: now, StartedAt: &now}, audit{Caller: tester.Name}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Create(context.Background(), id, b, store.Meta{Status: string(run.StatusRunning), Owner: tester.Name}); err != nil {
		t.Fatal(err)
	}
	return id
}
