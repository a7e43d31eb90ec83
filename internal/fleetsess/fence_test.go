package fleetsess

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/store"
)

// checkpointedPair starts nodes a and b that checkpoint every every, and
// a session on a whose first checkpoint (after code) is recorded.
func checkpointedPair(t *testing.T, every time.Duration, code string) (a, b *node, id string, entry store.SessionEntry) {
	t.Helper()
	srv := fleetServer(t)
	sc := engine.SessionConfig{Max: 4, DefaultMemoryBytes: 64 << 20, CheckpointEvery: every}
	a, b = startNodeWith(t, srv, "a", sc), startNodeWith(t, srv, "b", sc)
	s := a.create(t)
	time.Sleep(every)
	a.cell(t, s.ID, code)
	waitFor(t, 20*time.Second, "the checkpoint", func() bool {
		e, _, err := b.reg.GetSession(context.Background(), s.ID)
		entry = e
		return err == nil && e.Checkpoint != ""
	})
	return a, b, s.ID, entry
}

// TestFencedNodeStopsServing: a node the fleet declared lost while it was
// alive (a late heartbeat) stops serving its session as soon as it learns
// it: the session then lives on one node only, resumed from its
// checkpoint, whichever node the calls reach.
func TestFencedNodeStopsServing(t *testing.T) {
	a, b, id, _ := checkpointedPair(t, 2*time.Second, "x = 1")
	ctx := context.Background()
	b.r.NodeLost("a") // a is alive: only its heartbeat was late
	a.r.SelfLost()    // a sees the mark on its heartbeat entry
	if n := a.eng.LiveSessions(); n != 0 {
		t.Fatalf("a still holds %d sessions after it learnt it was declared lost", n)
	}
	if err := b.r.takeOver(ctx, id, "a"); err != nil {
		t.Fatalf("b's takeover: %v", err)
	}
	ra := a.cell(t, id, "x = x + 100; x")
	rb := b.cell(t, id, "x")
	if ra.Result == nil || *ra.Result != "101" || rb.Result == nil || *rb.Result != "101" {
		t.Fatalf("via a: %v, via b: %v; want one copy, 101 through both", ra.Result, rb.Result)
	}
	if a.eng.LiveSessions()+b.eng.LiveSessions() != 1 {
		t.Fatalf("live copies: a %d, b %d; want one", a.eng.LiveSessions(), b.eng.LiveSessions())
	}
	if err := a.r.DeleteSession(ctx, id, alice); err != nil {
		t.Fatal(err)
	}
	if _, err := b.r.GetSession(ctx, id, alice); !errors.Is(err, engine.ErrSessionNotFound) {
		t.Fatalf("after a delete through a, the session via b: %v, want not found", err)
	}
}

// TestFencedNodeAloneResumesFromCheckpoint: a node that learns it was
// declared lost before any survivor settled its sessions settles them
// itself (parked on their checkpoint), and its next call resumes the
// session from there, saying so, with the checkpoint's execution count.
func TestFencedNodeAloneResumesFromCheckpoint(t *testing.T) {
	a, _, id, entry := checkpointedPair(t, 2*time.Second, "x = 1")
	a.cell(t, id, "x = 2")
	waitFor(t, 10*time.Second, "the count of cells", func() bool {
		e, _, err := a.reg.GetSession(context.Background(), id)
		return err == nil && e.Cells == 2
	})
	a.r.SelfLost()
	res := a.cell(t, id, "x")
	if res.Result == nil || *res.Result != "1" || res.RestoredFrom == nil || res.RestoredFrom.SnapshotID != entry.Checkpoint ||
		res.RestoredFrom.CellsLost != 1 || res.RestoredFrom.CheckpointExecutionCount != 1 || res.ExecutionCount != 2 {
		t.Fatalf("the first cell after the fence: result %v, restored %+v, count %d", res.Result, res.RestoredFrom, res.ExecutionCount)
	}
}

// TestOldRunCannotWriteTheParkedEntry: a node declared lost that does not
// know it yet goes on checkpointing its session; those writes fail
// (the entry is parked for another node), the checkpoint the entry names
// stays stored, the new one is deleted, and the session resumes from the
// named one once the node is really gone.
func TestOldRunCannotWriteTheParkedEntry(t *testing.T) {
	const every = 2 * time.Second
	a, b, id, _ := checkpointedPair(t, every, "x = 1")
	ctx := context.Background()
	b.r.NodeLost("a")
	parkedOn, _, err := b.reg.GetSession(ctx, id)
	if err != nil || !parkedOn.FromCheckpoint {
		t.Fatalf("the entry after NodeLost: %+v, %v", parkedOn, err)
	}
	before := hibernationIDs(t, b)
	time.Sleep(every)
	a.cell(t, id, "x = 2") // a checkpoint is due: a does not know it was declared lost
	a.cell(t, id, "x = 3")
	time.Sleep(3 * time.Second) // the checkpoint's save and its refused record
	e, _, err := b.reg.GetSession(ctx, id)
	if err != nil || e.Hibernation != parkedOn.Hibernation || e.Checkpoint != parkedOn.Checkpoint || e.Cells != parkedOn.Cells {
		t.Fatalf("the parked entry was written by the old run: %+v (was %+v), %v", e, parkedOn, err)
	}
	after := hibernationIDs(t, b)
	if !after[e.Hibernation] {
		t.Fatalf("the checkpoint the parked entry names (%s) was deleted", e.Hibernation)
	}
	for snap := range after {
		if !before[snap] {
			t.Errorf("the old run's refused checkpoint %s is still stored", snap)
		}
	}
	a.kill()
	if res := b.cell(t, id, "x"); res.Result == nil || *res.Result != "1" || res.RestoredFrom == nil {
		t.Fatalf("via b after a went away: %v, restored %+v", res.Result, res.RestoredFrom)
	}
}

// TestCellInFlightWhenItsNodeIsDeclaredLost: a forwarded cell whose node
// is declared lost while it runs is not run a second time from the
// checkpoint: the caller learns that its outcome is unknown.
func TestCellInFlightWhenItsNodeIsDeclaredLost(t *testing.T) {
	a, b, id, _ := checkpointedPair(t, 2*time.Second, "n = 0")
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		_, err := b.r.ExecuteCell(ctx, id, alice, engine.CellRequest{Code: "import time; time.sleep(3); n += 1", Timeout: 20 * time.Second})
		done <- err
	}()
	waitBusy(t, b, id)
	b.r.NodeLost("a")
	if err := <-done; !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("the cell in flight: %v, want ErrUnavailable (outcome unknown)", err)
	}
	a.r.SelfLost()
	if res := b.cell(t, id, "n"); res.Result == nil || *res.Result != "0" || res.RestoredFrom == nil {
		t.Fatalf("the next cell: n = %v, restored %+v; want the checkpoint's 0, the cell not re-run", res.Result, res.RestoredFrom)
	}
}
