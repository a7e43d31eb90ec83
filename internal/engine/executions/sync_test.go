package executions

import (
	"context"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/engine/admission"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/engine/runtest"
)

// TestSyncAdmittedAtOnceRunsLikeAnyOther: a synchronous execution that
// finds a free slot is stored running from the start (no pending record
// to turn running), yet everything that reads it sees an ordinary
// execution: GET says running with its start time and node, the running listing
// has it, a follower sees pending then running, and a kill from any
// caller ends it killed with its partial output.
func TestSyncAdmittedAtOnceRunsLikeAnyOther(t *testing.T) {
	e := start(t, t.TempDir(), nodeConfig{slots: admission.Config{Concurrency: 2}, exec: Config{Node: "a"}}, nil)
	ctx := context.Background()
	type result struct {
		x   *run.Execution
		err error
	}
	got := make(chan result, 1)
	go func() {
		x, err := e.eng.RunSync(ctx, runtest.Script("block"))
		got <- result{x, err}
	}()
	var id string
	runtest.WaitFor(t, "the sync execution in the running listing", func() bool {
		page, _, err := e.eng.List(ctx, ListOptions{Status: run.StatusRunning, AllOwners: true})
		if err != nil || len(page) != 1 {
			return false
		}
		id = page[0].ID
		return true
	})
	x, err := getExec(ctx, e.eng, id)
	if err != nil {
		t.Fatal(err)
	}
	if x.Status != run.StatusRunning || x.StartedAt == nil || x.StartedAt.Before(x.CreatedAt) || x.Node != "a" {
		t.Errorf("while running: status %s started_at %v created_at %v node %q", x.Status, x.StartedAt, x.CreatedAt, x.Node)
	}
	events, err := follow(ctx, e.eng, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for ev := range events {
		seen = append(seen, string(ev.Type)+":"+ev.Data)
		if ev.Type == EventStdout {
			break // the partial output is live
		}
	}
	if strings.Join(seen, ",") != "status:pending,status:running,stdout:partial\n" {
		t.Errorf("events while running = %q", seen)
	}
	if st, err := e.eng.Kill(ctx, id); err != nil || st != run.StatusKilled {
		t.Fatalf("Kill = %s, %v; want killed", st, err)
	}
	r := <-got
	if r.err != nil || r.x.Status != run.StatusKilled || r.x.Stdout != "partial\n" || r.x.ID != id {
		t.Fatalf("RunSync = %+v, %v; want %s killed with its partial output", r.x, r.err, id)
	}
	if st := statusOf(t, e.eng, id); st != run.StatusKilled {
		t.Errorf("stored status %s, want killed", st)
	}
	if s := e.node.adm.Stats(); s.Running != 0 {
		t.Errorf("slots still held after the end: %+v", s)
	}
}
