package executions

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine/admission"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/engine/runtest"
	"github.com/pyexec/pyexec/internal/store"
)

// nodeConfig is what these tests configure of a node: its admission and
// its executions (and, for start, its environments).
type nodeConfig struct {
	slots admission.Config
	exec  Config
	envs  run.Environments
	// driver builds the payload's argv (start's default: a plain
	// script, runtest.PlainDriver).
	driver run.Driver
}

// node is a node's executions wired as the engine wires them (without
// the fleet's membership: no other node is alive to them).
type node struct {
	x   *Service
	adm *admission.Gate
}

// newNode builds the executions of a node over deps.Store and starts
// them as the engine does; they are stopped when the test ends unless the
// test stopped them. deps needs only Store, Runner, Interpreters and
// Driver (and what the test adds).
func newNode(t *testing.T, cfg nodeConfig, deps Deps) *node {
	t.Helper()
	n := buildNode(t, cfg, deps)
	ctx := context.Background()
	if err := n.x.Index(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.x.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	n.x.Run()
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := n.stop(cctx); err != nil && !errors.Is(err, run.ErrClosed) {
			t.Errorf("stopping the executions: %v", err)
		}
	})
	return n
}

// buildNode builds the executions of a node without starting them: they
// run sync executions, nothing from the queue.
func buildNode(t *testing.T, cfg nodeConfig, deps Deps) *node {
	t.Helper()
	adm, err := admission.New(cfg.slots, Tally{Store: deps.Store})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.exec.Node == "" {
		cfg.exec.Node = "local"
	}
	deps.Slots, deps.Alive = adm, func(string) bool { return false }
	x, err := New(cfg.exec, deps)
	if err != nil {
		t.Fatal(err)
	}
	return &node{x: x, adm: adm}
}

// stop stops the node's executions as the engine's Close does: what has
// not begun is stopped, what runs may finish until ctx ends, then it is
// stopped too (and the error says so). A second stop is run.ErrClosed.
func (n *node) stop(ctx context.Context) error {
	n.x.mu.Lock()
	closed := n.x.closed
	n.x.mu.Unlock()
	if closed {
		return run.ErrClosed
	}
	n.adm.Close()
	n.x.Close()
	n.x.StopUnstarted()
	done := make(chan struct{})
	go func() {
		n.x.Wait()
		close(done)
	}()
	select {
	case <-done:
		n.x.Abort()
		return nil
	case <-ctx.Done():
	}
	n.x.Abort()
	<-done
	return context.Cause(ctx)
}

// env is a node's executions on a real embedded store in a temp dir.
type env struct {
	dir    string
	emb    *store.Embedded
	st     *store.NATS
	eng    *Service
	node   *node
	runner *runtest.Runner
}

// start opens the store in dir and starts a node's executions on it;
// both are closed when the test ends unless the test closed them.
func start(t *testing.T, dir string, cfg nodeConfig, runner Runner) *env {
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
	e := &env{dir: dir, emb: emb, st: st}
	t.Cleanup(func() { // after the node's
		if !e.emb.Conn().IsClosed() {
			if err := e.emb.Close(); err != nil {
				t.Errorf("store Close: %v", err)
			}
		}
	})
	if cfg.driver == nil {
		cfg.driver = runtest.PlainDriver{}
	}
	e.node = newNode(t, cfg, Deps{Store: st, Runner: runner, Interpreters: runtest.Interpreters{}, Driver: cfg.driver,
		Envs: cfg.envs})
	e.eng = e.node.x
	e.runner, _ = runner.(*runtest.Runner)
	return e
}

// close stops the node's executions and closes the store.
func (e *env) close(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.node.stop(ctx); err != nil && !errors.Is(err, run.ErrClosed) {
		t.Errorf("stopping the executions: %v", err)
	}
	if !e.emb.Conn().IsClosed() {
		if err := e.emb.Close(); err != nil {
			t.Errorf("store Close: %v", err)
		}
	}
}

// crash simulates the process dying: the store vanishes under the node,
// which is then stopped without waiting and can record nothing more.
func (e *env) crash(t *testing.T) {
	t.Helper()
	if err := e.emb.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.node.stop(ctx); err == nil {
		t.Error("stopping with running executions and no time left reported no error")
	}
}

// tester is the caller of the tests' requests (runtest.Script).
const tester = runtest.Tester

// getExec reads an execution as the engine's Get does for its owner.
func getExec(ctx context.Context, x *Service, id string) (*run.Execution, error) {
	r, err := x.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := x.WithOutput(ctx, r); err != nil {
		return nil, err
	}
	return &r.Execution, nil
}

// listFiles lists an execution's files as the engine's ListFiles does.
func listFiles(ctx context.Context, x *Service, id string) ([]run.FileInfo, error) {
	r, err := x.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	return r.Files, nil
}

// openFile opens an execution's file as the engine's OpenFile does.
func openFile(ctx context.Context, x *Service, id, path string) (io.ReadCloser, run.FileInfo, error) {
	r, err := x.Load(ctx, id)
	if err != nil {
		return nil, run.FileInfo{}, err
	}
	return x.OpenFile(ctx, r, path)
}

func statusOf(t *testing.T, x *Service, id string) run.Status {
	t.Helper()
	ex, err := getExec(context.Background(), x, id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return ex.Status
}

// follow follows an execution as the engine's Follow does: run.ErrNotFound
// for an execution that does not exist.
func follow(ctx context.Context, x *Service, id string, afterSeq uint64) (<-chan Event, error) {
	if _, err := x.Load(ctx, id); err != nil {
		return nil, err
	}
	return x.Follow(ctx, id, afterSeq)
}
