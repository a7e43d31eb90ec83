package engine

import (
	"context"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine/runtest"
	"github.com/pyexec/pyexec/internal/store"
)

// env is an engine on a real embedded store in a temp dir.
type env struct {
	dir    string
	emb    *store.Embedded
	st     *store.NATS
	eng    *Engine
	runner *runtest.Runner
}

// start opens the store in dir and starts an engine on it; both are closed
// when the test ends unless the test closed them.
func start(t *testing.T, dir string, cfg Config, runner Runner) *env {
	t.Helper()
	ctx := context.Background()
	emb, err := store.StartEmbedded(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, emb.Conn(), store.Config{}, store.FollowersOn(emb.FollowConn()))
	if err != nil {
		t.Fatal(err)
	}
	if runner == nil {
		runner = &runtest.Runner{}
	}
	eng, err := New(cfg, Deps{Store: st, Runner: runner, Interpreters: runtest.Interpreters{}, Driver: runtest.PlainDriver{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e := &env{dir: dir, emb: emb, st: st, eng: eng}
	e.runner, _ = runner.(*runtest.Runner)
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

// crash simulates the process dying: the store vanishes under the engine,
// which is then stopped without waiting and can record nothing more.
func (e *env) crash(t *testing.T) {
	t.Helper()
	if err := e.emb.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.eng.Close(ctx); err == nil {
		t.Error("Close with running executions and no time left reported no error")
	}
}

// tester is the caller of the tests' requests (script).
var tester = Caller{Name: "tester"}

func script(s string) Request {
	return Request{Files: []File{{Path: "main.py", Data: []byte(s)}}, Entrypoint: "main.py", Caller: tester.Name, ClientAddr: "127.0.0.1:5555"}
}

func statusOf(t *testing.T, eng *Engine, id string) Status {
	t.Helper()
	x, err := eng.Get(context.Background(), tester, id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return x.Status
}
