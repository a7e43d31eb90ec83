package fleetsess

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/snapshot"
)

// shutDown stops n as SIGTERM does: its engine parks its idle sessions
// (n must park), then its router stops answering.
func (n *node) shutDown(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.eng.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.r.Close(); err != nil {
		t.Fatal(err)
	}
}

func parkingNode(t *testing.T, srv *server.Server, name string) *node {
	return startNodeOpts(t, srv, name, engine.SessionConfig{Max: 8, DefaultMemoryBytes: 64 << 20}, true)
}

// TestSavedSessionResumesOnAnotherNode: a session its node saved at its
// shutdown is resumed, with its variables, by the node that gets its next
// call while its own node is away; another key still gets 404; the node,
// started again, leaves the session to the node that took it, and serves
// it from there.
func TestSavedSessionResumesOnAnotherNode(t *testing.T) {
	srv := fleetServer(t)
	a, b := parkingNode(t, srv, "a"), parkingNode(t, srv, "b")
	ctx := context.Background()
	s := a.create(t)
	a.cell(t, s.ID, "x = 41")
	a.shutDown(t)
	if e, _, err := b.reg.GetSession(ctx, s.ID); err != nil || e.Hibernation == "" || e.Node != "a" {
		t.Fatalf("the registry after a's shutdown: %+v, %v; want it parked on a", e, err)
	}

	if _, err := b.r.ExecuteCell(ctx, s.ID, engine.Caller{Name: "bob"}, engine.CellRequest{Code: "x"}); !errors.Is(err, engine.ErrSessionNotFound) {
		t.Fatalf("bob's call on alice's saved session: %v, want not found", err)
	}
	res := b.cell(t, s.ID, "x + 1")
	if res.Result == nil || *res.Result != "42" || !res.Resumed || res.RestoredFrom != nil {
		t.Fatalf("the first cell via b after a's shutdown: result %v, resumed %v, restored %+v, %+v", res.Result, res.Resumed,
			res.RestoredFrom, res.Execution)
	}
	if b.eng.LiveSessions() != 1 {
		t.Fatalf("b holds %d sessions, want the one it took over", b.eng.LiveSessions())
	}
	if e, _, err := b.reg.GetSession(ctx, s.ID); err != nil || e.Node != "b" || e.Hibernation != "" || !e.TakenAt.IsZero() {
		t.Fatalf("the registry after the takeover: %+v, %v; want it live on b", e, err)
	}

	a2 := parkingNode(t, srv, "a")
	if a2.eng.LiveSessions() != 0 {
		t.Fatalf("a, started again, took back %d sessions; b holds its only one", a2.eng.LiveSessions())
	}
	if res := a2.cell(t, s.ID, "x"); res.Result == nil || *res.Result != "41" || res.Resumed {
		t.Fatalf("a cell via a after its restart: %v, resumed %v", res.Result, res.Resumed)
	}
}

// TestTakeoverRace: nodes that take over the same saved session at once
// (two callers on two nodes, and the session's own node starting again)
// leave it on exactly one node; the others are told where it went or to
// retry, and every call made after answers with its state.
func TestTakeoverRace(t *testing.T) {
	srv := fleetServer(t)
	a, b, c := parkingNode(t, srv, "a"), parkingNode(t, srv, "b"), parkingNode(t, srv, "c")
	ctx := context.Background()
	const n = 4
	ids := make([]string, n)
	for i := range ids {
		ids[i] = a.create(t).ID
		a.cell(t, ids[i], fmt.Sprintf("v = %d", i))
	}
	a.shutDown(t)

	for i, id := range ids {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j, via := range []*node{b, c} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[j] = via.r.takeOver(ctx, id, "a")
			}()
		}
		wg.Wait()
		won := 0
		for j, err := range errs {
			switch {
			case err == nil:
				won++
			case errors.Is(err, errMoved) || errors.Is(err, engine.ErrUnavailable):
			default:
				t.Errorf("session %d: the takeover via node %d failed: %v", i, j, err)
			}
		}
		holders := 0
		for _, via := range []*node{b, c} {
			if _, err := via.eng.GetSession(ctx, id, alice); err == nil {
				holders++
			}
		}
		if won != 1 || holders != 1 {
			t.Fatalf("session %d: %d takeovers won (%v), %d engines hold it; want exactly one of each", i, won, errs, holders)
		}
		for _, via := range []*node{c, b} {
			if res := via.cell(t, id, "v"); res.Result == nil || *res.Result != fmt.Sprint(i) {
				t.Fatalf("session %d via %s after the race: %v", i, via.name, res.Result)
			}
		}
	}

	// Two cells at once on two nodes: one takes it, the other gets the
	// answer or a retryable error, never a second copy.
	d := parkingNode(t, srv, "d")
	s, err := c.r.createLocal(ctx, engine.SessionRequest{Requirements: "-", Caller: alice.Name})
	if err != nil {
		t.Fatal(err)
	}
	c.cell(t, s.ID, "w = 7")
	c.shutDown(t)
	var wg sync.WaitGroup
	type answer struct {
		res engine.CellResult
		err error
	}
	answers := make([]answer, 2)
	for j, via := range []*node{b, d} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := via.r.ExecuteCell(ctx, s.ID, alice, engine.CellRequest{Code: "w", EvalLastExpr: true, Timeout: 20 * time.Second})
			answers[j] = answer{res, err}
		}()
	}
	wg.Wait()
	ok := 0
	for _, an := range answers {
		switch {
		case an.err == nil && an.res.Result != nil && *an.res.Result == "7":
			ok++
		case errors.Is(an.err, engine.ErrUnavailable) || errors.Is(an.err, engine.ErrSessionBusy):
		default:
			t.Errorf("a call that raced for the saved session: %+v, %v", an.res.Execution, an.err)
		}
	}
	holders := 0
	for _, via := range []*node{b, d} {
		if _, err := via.eng.GetSession(ctx, s.ID, alice); err == nil {
			holders++
		}
	}
	if ok == 0 || holders != 1 {
		t.Fatalf("%d calls answered, %d nodes hold the session; want one holder", ok, holders)
	}
}

// TestSessionResumesFromItsCheckpoint: a node killed without warning
// (its connection cut, nothing saved): a session that had a checkpoint,
// then ran one more cell, resumes on another node with its checkpointed
// variables, and its first cell says restored_from with that checkpoint
// and one cell lost; a session that had none ends node_lost.
func TestSessionResumesFromItsCheckpoint(t *testing.T) {
	srv := fleetServer(t)
	const every = 3 * time.Second
	sc := engine.SessionConfig{Max: 4, DefaultMemoryBytes: 64 << 20, CheckpointEvery: every}
	a, b := startNodeWith(t, srv, "a", sc), startNodeWith(t, srv, "b", sc)
	ctx := context.Background()
	s, bare := a.create(t), a.create(t)
	a.cell(t, bare.ID, "y = 1") // younger than every: no checkpoint
	time.Sleep(every)
	a.cell(t, s.ID, "x = 1")
	var ckpt string
	waitFor(t, 20*time.Second, "the checkpoint recorded after the first cell", func() bool {
		e, _, err := b.reg.GetSession(ctx, s.ID)
		ckpt = e.Checkpoint
		return err == nil && e.Checkpoint != "" && e.CheckpointCells == 1
	})
	a.cell(t, s.ID, "x = 2") // within every of the checkpoint: none new
	waitFor(t, 10*time.Second, "the count of cells recorded", func() bool {
		e, _, err := b.reg.GetSession(ctx, s.ID)
		return err == nil && e.Cells == 2 && e.Checkpoint == ckpt
	})
	if e, _, _ := b.reg.GetSession(ctx, bare.ID); e.Checkpoint != "" || e.Cells != 0 {
		t.Fatalf("a session that ran a cell younger than CheckpointEvery: %+v, want no checkpoint and no count", e)
	}
	a.kill()

	if _, err := b.r.ExecuteCell(ctx, s.ID, engine.Caller{Name: "bob"}, engine.CellRequest{Code: "x"}); !errors.Is(err, engine.ErrSessionNotFound) {
		t.Fatalf("bob's call on alice's lost session: %v, want not found", err)
	}
	res := b.cell(t, s.ID, "x")
	if res.Result == nil || *res.Result != "1" || !res.Resumed || res.RestoredFrom == nil ||
		res.RestoredFrom.SnapshotID != ckpt || res.RestoredFrom.CellsLost != 1 || res.ExecutionCount != 2 {
		t.Fatalf("the first cell via b after a's loss: result %v, resumed %v, restored %+v, count %d", res.Result, res.Resumed,
			res.RestoredFrom, res.ExecutionCount)
	}
	if res := b.cell(t, s.ID, "x"); res.RestoredFrom != nil || res.Resumed {
		t.Fatalf("the second cell still says restored %+v, resumed %v", res.RestoredFrom, res.Resumed)
	}
	if e, _, err := b.reg.GetSession(ctx, s.ID); err != nil || e.Node != "b" || e.Hibernation != "" || e.FromCheckpoint {
		t.Fatalf("the registry after the restore: %+v, %v; want it live on b", e, err)
	}
	_, err := b.r.GetSession(ctx, bare.ID, alice)
	assertLost(t, err, bare.ID)
	// the checkpoint it resumed from is deleted; b took its own since
	waitFor(t, 10*time.Second, "b's own checkpoint of the restored session", func() bool {
		e, _, err := b.reg.GetSession(ctx, s.ID)
		return err == nil && e.Checkpoint != "" && e.Checkpoint != ckpt
	})
	if _, ok := hibernationIDs(t, b)[ckpt]; ok {
		t.Errorf("the checkpoint the session resumed from is still stored")
	}
	// A restart loses the state: its checkpoint would bring it back, so it goes.
	e, _, _ := b.reg.GetSession(ctx, s.ID)
	if _, err := b.r.RestartSession(ctx, s.ID, alice); err != nil {
		t.Fatal(err)
	}
	if after, _, err := b.reg.GetSession(ctx, s.ID); err != nil || after.Checkpoint != "" || after.Cells != 0 {
		t.Errorf("the registry after a restart: %+v, %v; want no checkpoint, no count", after, err)
	}
	if _, ok := hibernationIDs(t, b)[e.Checkpoint]; ok {
		t.Errorf("the checkpoint of the state before the restart is still stored")
	}
}

// hibernationIDs is the set of the fleet's hibernation snapshots.
func hibernationIDs(t *testing.T, n *node) map[string]bool {
	t.Helper()
	all, err := n.reg.ListSnapshots(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, si := range all {
		if si.Kind == snapshot.KindHibernation {
			out[si.ID] = true
		}
	}
	return out
}

// TestRestartRacesATakeover: the node that saved a session starts again
// while another node takes the session over for a call: the session ends
// up on exactly one of them, the call answers with its state or a
// retryable error, and later calls through either node find it.
func TestRestartRacesATakeover(t *testing.T) {
	srv := fleetServer(t)
	a, b := parkingNode(t, srv, "a"), parkingNode(t, srv, "b")
	ctx := context.Background()
	s := a.create(t)
	a.cell(t, s.ID, "z = 5")
	a.shutDown(t)
	type answer struct {
		res engine.CellResult
		err error
	}
	got := make(chan answer, 1)
	go func() {
		res, err := b.r.ExecuteCell(ctx, s.ID, alice, engine.CellRequest{Code: "z", EvalLastExpr: true, Timeout: 20 * time.Second})
		got <- answer{res, err}
	}()
	a2 := parkingNode(t, srv, "a")
	an := <-got
	if an.err != nil && !errors.Is(an.err, engine.ErrUnavailable) {
		t.Fatalf("the call racing the restart: %v, want its answer or a retryable error", an.err)
	}
	if an.err == nil && (an.res.Result == nil || *an.res.Result != "5") {
		t.Fatalf("the call racing the restart answered %+v", an.res.Execution)
	}
	holders := 0
	for _, n := range []*node{a2, b} {
		if _, err := n.eng.GetSession(ctx, s.ID, alice); err == nil {
			holders++
		}
	}
	if holders != 1 {
		t.Fatalf("%d nodes hold the session, want 1", holders)
	}
	for _, n := range []*node{a2, b} {
		if res := n.cell(t, s.ID, "z"); res.Result == nil || *res.Result != "5" {
			t.Fatalf("a cell via %s after the race: %v", n.name, res.Result)
		}
	}
}
