package sessions

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// checkpointRecorder is a Deps.OnCheckpoint that records what it is told
// and refuses (as a registry that failed, or that names another holder)
// while refuse is set.
type checkpointRecorder struct {
	mu       sync.Mutex
	refuse   bool
	told     []Checkpoint
	recorded string
}

func (r *checkpointRecorder) checkpoint(c Checkpoint) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.told = append(r.told, c)
	if r.refuse {
		return errors.New("refused")
	}
	r.recorded = c.Snapshot
	return nil
}

func (r *checkpointRecorder) state() (int, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.told), r.recorded
}

// TestRefusedCheckpointKeepsTheRecordedOne: a checkpoint whose record
// fails is deleted, and the one the record names stays stored; a failed
// checkpoint is not tried again at the next cell, only an interval later.
func TestRefusedCheckpointKeepsTheRecordedOne(t *testing.T) {
	v := newVault(t)
	var rec checkpointRecorder
	const every = time.Second
	svc := newServiceDeps(t, Config{CheckpointEvery: every}, false, Deps{Vault: v, OnCheckpoint: rec.checkpoint})
	id := newSession(t, svc, Request{Caller: "alice", IdleTimeout: time.Hour})
	time.Sleep(every)
	cell(t, svc, id, "x = 1")
	waitFor(t, 10*time.Second, "the first checkpoint", func() bool { n, r := rec.state(); return n == 1 && r != "" })
	_, first := rec.state()

	rec.mu.Lock()
	rec.refuse = true
	rec.mu.Unlock()
	time.Sleep(every)
	cell(t, svc, id, "x = 2")
	waitFor(t, 10*time.Second, "the refused checkpoint", func() bool { n, _ := rec.state(); return n == 2 })
	waitFor(t, 5*time.Second, "the refused checkpoint deleted", func() bool { return v.count() == 1 })
	if _, err := v.Open(t.Context(), first, "alice"); err != nil {
		t.Fatalf("the recorded checkpoint %s after a refused one: %v", first, err)
	}
	// Within the interval after the failure, cells start no checkpoint.
	for i := 0; i < 5; i++ {
		cell(t, svc, id, "x += 1")
	}
	time.Sleep(200 * time.Millisecond)
	if n, _ := rec.state(); n != 2 {
		t.Fatalf("%d checkpoints told after 5 cells within the interval of a failed one; want none new", n-2)
	}
}
