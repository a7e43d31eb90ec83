package engine

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine/runtest"
	"github.com/pyexec/pyexec/internal/snapshot"
	"github.com/pyexec/pyexec/internal/store"
)

// env is an engine on a real embedded store in a temp dir.
type env struct {
	emb *store.Embedded
	st  *store.NATS
	eng *Engine
}

// start opens a store in a temp dir and starts an engine on it with the
// runtest fakes; both are closed when the test ends unless the test
// closed them.
func start(t *testing.T, cfg Config) *env {
	t.Helper()
	return startWith(t, cfg, Deps{Runner: &runtest.Runner{}})
}

// startWith is start with deps, to which it adds the store and, unless
// deps has them, the runtest interpreters and driver.
func startWith(t *testing.T, cfg Config, deps Deps) *env {
	t.Helper()
	ctx := context.Background()
	emb, err := store.StartEmbedded(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, emb.Conn(), store.Config{}, store.FollowersOn(emb.FollowConn()))
	if err != nil {
		t.Fatal(err)
	}
	deps.Store = st
	if deps.Snapshots == nil && cfg.Snapshots.Key.IsZero() {
		dir := t.TempDir()
		if cfg.Snapshots.Key, err = snapshot.LoadKey(dir); err != nil {
			t.Fatal(err)
		}
		deps.Snapshots, cfg.Snapshots.SpoolDir = st, dir
	}
	if deps.Interpreters == nil {
		deps.Interpreters = runtest.Interpreters{}
	}
	if deps.Driver == nil {
		deps.Driver = runtest.PlainDriver{}
	}
	eng, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e := &env{emb: emb, st: st, eng: eng}
	t.Cleanup(func() { e.close(t) })
	return e
}

func (e *env) close(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.eng.Close(ctx); err != nil && err != ErrClosed {
		t.Errorf("engine Close: %v", err)
	}
	if !e.emb.Conn().IsClosed() {
		if err := e.emb.Close(); err != nil {
			t.Errorf("store Close: %v", err)
		}
	}
}

// tester is the caller of the tests' requests (runtest.Script).
var tester = Caller{Name: runtest.Tester}

// auditActions are the audit trail's records of what callers did (the
// executions record the end of each execution, action "end").
func auditActions(t *testing.T, e *env) []actionRecord {
	t.Helper()
	var out []actionRecord
	for _, m := range runtest.AuditLines(t, e.st) {
		var r actionRecord
		if err := json.Unmarshal(m, &r); err != nil {
			t.Fatal(err)
		}
		if r.Action != "end" {
			out = append(out, r)
		}
	}
	return out
}
