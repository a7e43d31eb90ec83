package executions

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/engine/runtest"
	"github.com/pyexec/pyexec/internal/store"
)

// lossyStore fails the first write of a completed record, as a store whose
// replies are stuck behind other traffic would: either the write never
// happened, or it was stored and only its reply was lost.
type lossyStore struct {
	*store.NATS
	stored bool // the failed write was stored nonetheless
	failed atomic.Int32
}

func (s *lossyStore) Update(ctx context.Context, key string, value []byte, rev uint64, m store.Meta) (uint64, error) {
	if bytes.Contains(value, []byte(`"status":"completed"`)) && s.failed.Add(1) == 1 {
		if s.stored {
			if _, err := s.NATS.Update(ctx, key, value, rev, m); err != nil {
				return 0, err
			}
		}
		return 0, context.DeadlineExceeded
	}
	return s.NATS.Update(ctx, key, value, rev, m)
}

// engineOver starts the executions of node over st (a test's store
// standing in front of another node's) with a fake runner, stopped when
// the test ends; onFinish may be nil.
func engineOver(t *testing.T, node string, st Store, onFinish func(Finished)) *Service {
	t.Helper()
	return newNode(t, nodeConfig{exec: Config{Node: node}}, Deps{Store: st, Runner: &runtest.Runner{},
		Interpreters: runtest.Interpreters{}, Driver: runtest.PlainDriver{}, OnFinish: onFinish}).x
}

// TestOutcomeSurvivesAFailedWrite checks that a failed write of the
// outcome is retried: the result is recorded, followers get one final
// status event, and the end is reported once.
func TestOutcomeSurvivesAFailedWrite(t *testing.T) {
	for _, stored := range []bool{false, true} {
		name := map[bool]string{false: "write lost", true: "reply lost"}[stored]
		t.Run(name, func(t *testing.T) {
			e := start(t, t.TempDir(), nodeConfig{}, nil)
			lossy := &lossyStore{NATS: e.st, stored: stored}
			var finished atomic.Int32
			eng := engineOver(t, "lossy", lossy, func(Finished) { finished.Add(1) })
			ctx := context.Background()

			x, err := eng.RunSync(ctx, runtest.Script("print:kept\n"))
			if err != nil {
				t.Fatalf("RunSync: %v", err)
			}
			if x.Status != run.StatusCompleted || x.Stdout != "kept\n" || lossy.failed.Load() < 1 {
				t.Fatalf("result %s %q after %d failed writes, want completed with its output", x.Status, x.Stdout, lossy.failed.Load())
			}
			if got := statusOf(t, eng, x.ID); got != run.StatusCompleted {
				t.Fatalf("stored status %s, want completed", got)
			}
			ch, err := follow(ctx, eng, x.ID, 0)
			if err != nil {
				t.Fatal(err)
			}
			var statuses []string
			for ev := range ch {
				if ev.Type == EventStatus {
					statuses = append(statuses, ev.Data)
				}
			}
			if got := strings.Join(statuses, ","); got != "pending,running,completed" {
				t.Errorf("status events %s, want pending,running,completed", got)
			}
			if n := finished.Load(); n != 1 {
				t.Errorf("the end was reported %d times, want once", n)
			}
		})
	}
}

// refusingStore fails the creation of every record, once the execution's
// first events are stored.
type refusingStore struct {
	*store.NATS
	refused atomic.Value // the id of the record refused last
}

func (s *refusingStore) Create(ctx context.Context, key string, value []byte, m store.Meta) (uint64, error) {
	s.refused.Store(key)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if seq, err := s.LastEvent(ctx, key); err != nil || seq > 0 {
			break
		}
	}
	return 0, context.DeadlineExceeded
}

// TestFailedCreateLeavesNoEvents: a synchronous execution whose record
// cannot be written fails, and leaves no status events of a record that
// does not exist.
func TestFailedCreateLeavesNoEvents(t *testing.T) {
	e := start(t, t.TempDir(), nodeConfig{}, nil)
	refusing := &refusingStore{NATS: e.st}
	eng := engineOver(t, "refusing", refusing, nil)
	ctx := context.Background()
	if x, err := eng.RunSync(ctx, runtest.Script("print:lost\n")); err == nil {
		t.Fatalf("RunSync succeeded (%s) with no record written", x.Status)
	}
	id, _ := refusing.refused.Load().(string)
	if id == "" {
		t.Fatal("no record was created")
	}
	if seq, err := refusing.LastEvent(ctx, id); err != nil || seq != 0 {
		t.Fatalf("events of %s left at sequence %d (err %v), want none", id, seq, err)
	}
}
