package executions

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine/admission"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/engine/runtest"
	"github.com/pyexec/pyexec/internal/store"
)

// startFailingStore fails the writes that mark an execution running, the
// first one or (every) all of them, as a store between leaders would:
// either the write never happened, or it was stored and only its reply
// was lost (stored). onFail, if set, is called after each failed write.
type startFailingStore struct {
	*store.NATS
	stored bool
	every  bool
	onFail func(key string)
	failed atomic.Int32
}

func (s *startFailingStore) Update(ctx context.Context, key string, value []byte, rev uint64, m store.Meta) (uint64, error) {
	if bytes.Contains(value, []byte(`"status":"running"`)) && (s.every || s.failed.Load() == 0) {
		s.failed.Add(1)
		if s.onFail != nil {
			defer s.onFail(key)
		}
		if s.stored {
			if _, err := s.NATS.Update(ctx, key, value, rev, m); err != nil {
				return 0, err
			}
		}
		return 0, context.DeadlineExceeded
	}
	return s.NATS.Update(ctx, key, value, rev, m)
}

// startOver starts one node whose engine sees the embedded store through
// wrap, alone on it (no other node takes its jobs).
func startOver(t *testing.T, cfg nodeConfig, wrap func(*store.NATS) Store) *env {
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
	runner := &runtest.Runner{}
	t.Cleanup(func() { // after the node's
		if err := emb.Close(); err != nil {
			t.Errorf("store Close: %v", err)
		}
	})
	n := newNode(t, cfg, Deps{Store: wrap(st), Runner: runner, Interpreters: runtest.Interpreters{}, Driver: runtest.PlainDriver{}})
	return &env{emb: emb, st: st, eng: n.x, node: n, runner: runner}
}

// endOf waits until the execution id is final and returns it.
func endOf(t *testing.T, e *env, id string) *run.Execution {
	t.Helper()
	runtest.WaitFor(t, "the execution to end", func() bool { return statusOf(t, e.eng, id).Final() })
	x, err := getExec(context.Background(), e.eng, id)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// waitQueueEmpty waits until no job is left in the queue, taken or not.
func waitQueueEmpty(t *testing.T, e *env) {
	t.Helper()
	runtest.WaitFor(t, "the queue to drain", func() bool {
		d, err := e.st.QueueDepth(context.Background())
		return err == nil && d == 0
	})
}

// TestStartSurvivesAFailedWrite: a queued execution whose start is not
// confirmed once (the store lost the write or only its reply) still runs,
// once, and completes; in the fleet's test this execution stayed running
// for good, with no node to finish it.
func TestStartSurvivesAFailedWrite(t *testing.T) {
	for _, stored := range []bool{false, true} {
		name := map[bool]string{false: "write lost", true: "reply lost"}[stored]
		t.Run(name, func(t *testing.T) {
			failing := &startFailingStore{stored: stored}
			e := startOver(t, nodeConfig{}, func(st *store.NATS) Store { failing.NATS = st; return failing })
			id, err := e.eng.Submit(context.Background(), runtest.Script("print:ran\n"))
			if err != nil {
				t.Fatal(err)
			}
			x := endOf(t, e, id)
			if x.Status != run.StatusCompleted || x.Stdout != "ran\n" || failing.failed.Load() != 1 {
				t.Fatalf("%s %q (%s) after %d failed starts, want completed after 1", x.Status, x.Stdout, x.Error, failing.failed.Load())
			}
			waitQueueEmpty(t, e)
			if n := e.runner.Runs.Load(); n != 1 {
				t.Errorf("the payload ran %d times, want once", n)
			}
		})
	}
}

// TestStartNeverConfirmedIsNotRun: when no attempt to record the start is
// confirmed, the payload does not run and the execution ends failed with
// a reason, its job done with, rather than staying running.
func TestStartNeverConfirmedIsNotRun(t *testing.T) {
	failing := &startFailingStore{every: true}
	e := startOver(t, nodeConfig{}, func(st *store.NATS) Store { failing.NATS = st; return failing })
	id, err := e.eng.Submit(context.Background(), runtest.Script("print:ran\n"))
	if err != nil {
		t.Fatal(err)
	}
	x := endOf(t, e, id)
	if x.Status != run.StatusFailed || x.Reason != run.ReasonSetupError || x.ExitCode != run.ExitNoRun || x.FinishedAt == nil {
		t.Fatalf("%s %s %q exit %d, want failed setup_error", x.Status, x.Reason, x.Error, x.ExitCode)
	}
	if n := failing.failed.Load(); n != outcomeAttempts {
		t.Errorf("%d attempts to record the start, want %d", n, outcomeAttempts)
	}
	waitQueueEmpty(t, e)
	if n := e.runner.Runs.Load(); n != 0 {
		t.Errorf("the payload ran %d times, want never", n)
	}
}

// createLostStore stores every record it creates, and answers as if the
// write had timed out, unless pass is set.
type createLostStore struct {
	*store.NATS
	pass    atomic.Bool
	created atomic.Value // the id of the record created last
	// stuck fails every update, as a store that answers no write would.
	stuck atomic.Bool
}

func (s *createLostStore) Update(ctx context.Context, key string, value []byte, rev uint64, m store.Meta) (uint64, error) {
	if s.stuck.Load() {
		return 0, context.DeadlineExceeded
	}
	return s.NATS.Update(ctx, key, value, rev, m)
}

func (s *createLostStore) Create(ctx context.Context, key string, value []byte, m store.Meta) (uint64, error) {
	rev, err := s.NATS.Create(ctx, key, value, m)
	if err != nil || s.pass.Load() {
		return rev, err
	}
	s.created.Store(key)
	return 0, context.DeadlineExceeded
}

// TestSyncCreateWithLostReplyIsNotLeftRunning: a synchronous execution
// whose record was created running but whose reply was lost fails to its
// caller, does not run, and its record ends failed rather than running
// with no node to finish it.
func TestSyncCreateWithLostReplyIsNotLeftRunning(t *testing.T) {
	lost := &createLostStore{}
	e := startOver(t, nodeConfig{}, func(st *store.NATS) Store { lost.NATS = st; return lost })
	ctx := context.Background()
	if x, err := e.eng.RunSync(ctx, runtest.Script("print:ran\n")); err == nil {
		t.Fatalf("RunSync succeeded (%s) with its record unconfirmed", x.Status)
	}
	id, _ := lost.created.Load().(string)
	if id == "" {
		t.Fatal("no record was created")
	}
	x, err := getExec(ctx, e.eng, id)
	if err != nil {
		t.Fatal(err)
	}
	if x.Status != run.StatusFailed || x.Reason != run.ReasonSetupError || x.FinishedAt == nil {
		t.Fatalf("%s %s %q, want failed setup_error", x.Status, x.Reason, x.Error)
	}
	if n := e.runner.Runs.Load(); n != 0 {
		t.Errorf("the payload ran %d times, want never", n)
	}
}

// TestKillWhileTheStartIsRetried: a kill that comes while the start is
// being retried stops the retries; the execution ends killed, and the
// payload never runs.
func TestKillWhileTheStartIsRetried(t *testing.T) {
	failing := &startFailingStore{every: true}
	e := startOver(t, nodeConfig{}, func(st *store.NATS) Store { failing.NATS = st; return failing })
	ctx := context.Background()
	id, err := e.eng.Submit(ctx, runtest.Script("print:ran\n"))
	if err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "a failed start", func() bool { return failing.failed.Load() > 0 })
	st, err := e.eng.Kill(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	x, err := getExec(ctx, e.eng, id)
	if err != nil {
		t.Fatal(err)
	}
	if st != run.StatusKilled || x.Status != run.StatusKilled || x.FinishedAt == nil {
		t.Fatalf("kill answered %s, record %s %q; want killed", st, x.Status, x.Error)
	}
	if n := failing.failed.Load(); n >= outcomeAttempts {
		t.Errorf("%d attempts to record the start after the kill, want the retries stopped", n)
	}
	waitQueueEmpty(t, e)
	if n := e.runner.Runs.Load(); n != 0 {
		t.Errorf("the payload ran %d times, want never", n)
	}
}

// TestJobBackWhileTheStartIsRetried: the queue hands the job out again
// (its ack wait ran out) while this node still retries its start: the
// second copy is left alone, and the payload runs once.
func TestJobBackWhileTheStartIsRetried(t *testing.T) {
	failing := &startFailingStore{}
	var e *env
	failing.onFail = func(id string) {
		if err := e.st.Enqueue(context.Background(), runtest.Tester, id); err != nil {
			t.Errorf("enqueueing the job again: %v", err)
		}
	}
	e = startOver(t, nodeConfig{}, func(st *store.NATS) Store { failing.NATS = st; return failing })
	id, err := e.eng.Submit(context.Background(), runtest.Script("print:ran\n"))
	if err != nil {
		t.Fatal(err)
	}
	x := endOf(t, e, id)
	if x.Status != run.StatusCompleted || x.Stdout != "ran\n" {
		t.Fatalf("%s %q (%s), want completed", x.Status, x.Stdout, x.Error)
	}
	if n := e.runner.Runs.Load(); n != 1 {
		t.Errorf("the payload ran %d times, want once", n)
	}
}

// TestSyncInLineCreateWithLostReplyIsNotLeftPending: a synchronous
// execution that waits in line for a slot, whose record was created
// pending but whose reply was lost, fails to its caller, and its record
// ends failed rather than pending with no one to run it.
func TestSyncInLineCreateWithLostReplyIsNotLeftPending(t *testing.T) {
	lost := &createLostStore{}
	lost.pass.Store(true)
	e := startOver(t, nodeConfig{slots: admission.Config{Concurrency: 1}}, func(st *store.NATS) Store { lost.NATS = st; return lost })
	ctx := context.Background()
	blocker, err := e.eng.Submit(ctx, runtest.Script("block"))
	if err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "the blocker to run", func() bool { return statusOf(t, e.eng, blocker) == run.StatusRunning })
	lost.pass.Store(false)
	if x, err := e.eng.RunSync(ctx, runtest.Script("print:ran\n")); err == nil {
		t.Fatalf("RunSync succeeded (%s) with its record unconfirmed", x.Status)
	}
	id, _ := lost.created.Load().(string)
	if id == "" {
		t.Fatal("no record was created")
	}
	if x := endOf(t, e, id); x.Status != run.StatusFailed || x.Reason != run.ReasonSetupError {
		t.Fatalf("%s %s %q, want failed setup_error", x.Status, x.Reason, x.Error)
	}
	if _, err := e.eng.Kill(ctx, blocker); err != nil {
		t.Fatal(err)
	}
	if n := e.runner.Runs.Load(); n != 1 {
		t.Errorf("the runner ran %d payloads, want 1 (the blocker)", n)
	}
}

// readFailingStore fails every read of a record but the first, as a
// store that stops answering right after a worker loaded its job would.
type readFailingStore struct {
	*store.NATS
	mu     sync.Mutex
	reads  map[string]int
	failed atomic.Int32
}

func (s *readFailingStore) Get(ctx context.Context, key string) (store.Entry, error) {
	s.mu.Lock()
	s.reads[key]++
	n := s.reads[key]
	s.mu.Unlock()
	if n > 1 {
		s.failed.Add(1)
		return store.Entry{}, context.DeadlineExceeded
	}
	return s.NATS.Get(ctx, key)
}

// TestShutdownBeforeTheStartHandsTheJobBack: a node that stops while it
// retries a start it could not send (the record could not be read) hands
// the job back, pending, and another node runs it.
func TestShutdownBeforeTheStartHandsTheJobBack(t *testing.T) {
	failing := &readFailingStore{reads: make(map[string]int)}
	e := startOver(t, nodeConfig{}, func(st *store.NATS) Store { failing.NATS = st; return failing })
	ctx := context.Background()
	id, err := e.eng.Submit(ctx, runtest.Script("print:ran\n"))
	if err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "a failed read of the record", func() bool { return failing.failed.Load() > 0 })
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := e.node.stop(sctx); err != nil {
		t.Fatalf("stopping the node: %v", err)
	}
	ent, err := e.st.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(ent.Value, []byte(`"status":"pending"`)) {
		t.Fatalf("after the shutdown the record is %s, want pending", ent.Value)
	}
	second := &runtest.Runner{}
	next := newNode(t, nodeConfig{exec: Config{Node: "second"}}, Deps{Store: e.st, Runner: second,
		Interpreters: runtest.Interpreters{}, Driver: runtest.PlainDriver{}})
	runtest.WaitFor(t, "the job to run on the next node", func() bool { return statusOf(t, next.x, id) == run.StatusCompleted })
	if n, m := e.runner.Runs.Load(), second.Runs.Load(); n != 0 || m != 1 {
		t.Errorf("the stopped node ran it %d times and the next one %d, want 0 and 1", n, m)
	}
}
