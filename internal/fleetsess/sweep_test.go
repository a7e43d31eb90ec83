package fleetsess

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/snapshot"
)

// park records session id as its node's graceful shutdown does
// (SessionParked), under snapshot snap at parkedAt, through n's registry.
func park(t *testing.T, n *node, id, snap string, parkedAt time.Time) {
	t.Helper()
	ctx := context.Background()
	e, rev, err := n.reg.GetSession(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	e.Hibernation, e.ParkedAt = snap, parkedAt
	if err := n.reg.UpdateSession(ctx, e, rev); err != nil {
		t.Fatal(err)
	}
}

// TestListingLeavesParkedSessions: while the node that parked a session
// at its graceful shutdown is away, a listing through another node (the
// owner's, or an operator's of every key) shows the session hibernated
// and leaves it parked for its node, and another key does not see it.
func TestListingLeavesParkedSessions(t *testing.T) {
	srv := fleetServer(t)
	a, b := startNode(t, srv, "a", 4), startNode(t, srv, "b", 4)
	ctx := context.Background()
	s := a.create(t)
	a.kill()
	park(t, b, s.ID, "snap_parked", time.Now())
	for _, c := range []engine.Caller{alice, {Name: "ops", Admin: true}} {
		list := b.r.ListSessions(ctx, c)
		if len(list) != 1 || list[0].ID != s.ID || list[0].State != engine.SessionHibernated {
			t.Errorf("%s lists through b while a is away: %+v, want alice's session, hibernated", c.Name, list)
		}
	}
	if list := b.r.ListSessions(ctx, engine.Caller{Name: "bob"}); len(list) != 0 {
		t.Errorf("bob lists: %+v", list)
	}
	if e, _, err := b.reg.GetSession(ctx, s.ID); err != nil || e.Ended != "" || e.Hibernation != "snap_parked" {
		t.Errorf("its registry entry after the listings: %+v, %v; want it parked", e, err)
	}
}

// hibernations maps the sessions of the fleet's hibernation snapshots to
// the snapshots' ids.
func hibernations(t *testing.T, n *node) map[string]string {
	t.Helper()
	all, err := n.reg.ListSnapshots(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string)
	for _, si := range all {
		if si.Kind == snapshot.KindHibernation {
			out[si.Session] = si.ID
		}
	}
	return out
}

// TestSweepOfHibernationSnapshots: node a is killed while its sessions
// hibernate. Its session parked longer than ParkedFor ends and its
// snapshot goes at once; one parked lately waits for its node, snapshot
// and all; the snapshot of a session marked lost stays while it may still
// be written, and goes once older than OrphanAge. Node b's own
// hibernated session keeps its snapshot through every sweep and resumes
// with its state.
func TestSweepOfHibernationSnapshots(t *testing.T) {
	srv := fleetServer(t)
	sc := engine.SessionConfig{Max: 4, DefaultMemoryBytes: 64 << 20, HibernateAfter: 300 * time.Millisecond,
		ReapInterval: 50 * time.Millisecond}
	a, b := startNodeWith(t, srv, "a", sc), startNodeWith(t, srv, "b", sc)
	ctx := context.Background()
	lost, old, recent := a.create(t), a.create(t), a.create(t)
	// On a loaded machine the three creates take longer than
	// HibernateAfter: the first may be being saved, and a cell meanwhile
	// is a 409 (as during any hibernation); it runs once the save is done.
	waitFor(t, 20*time.Second, "a cell in the first session", func() bool {
		_, err := a.r.ExecuteCell(ctx, lost.ID, alice, engine.CellRequest{Code: "x = 1", Timeout: 20 * time.Second})
		if err != nil && !errors.Is(err, engine.ErrSessionBusy) {
			t.Fatalf("cell \"x = 1\" via a: %v", err)
		}
		return err == nil
	})
	kept, err := b.r.CreateSession(ctx, engine.SessionRequest{Requirements: "-", Caller: alice.Name})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.GetSession(ctx, kept.ID, alice); err != nil {
		t.Fatalf("the session created through b is not on b: %v", err)
	}
	b.cell(t, kept.ID, "y = 'kept'")
	waitFor(t, 20*time.Second, "the four sessions hibernated", func() bool { return len(hibernations(t, b)) == 4 })
	snaps := hibernations(t, b)
	a.kill()
	park(t, b, old.ID, snaps[old.ID], time.Now().Add(-2*time.Hour))
	park(t, b, recent.ID, snaps[recent.ID], time.Now())
	if _, err := b.r.markEnded(ctx, lost.ID, ReasonNodeLost); err != nil {
		t.Fatal(err)
	}

	b.r.sweep(ctx, time.Now())
	left := hibernations(t, b)
	if _, ok := left[old.ID]; ok {
		t.Errorf("the snapshot of a session parked 2h ago (ParkedFor 1h) is still stored")
	}
	if e, _, _ := b.reg.GetSession(ctx, old.ID); e.Ended != ReasonNodeLost {
		t.Errorf("the session parked 2h ago: ended %q, want node_lost", e.Ended)
	}
	for _, s := range []engine.Session{recent, lost, kept} {
		if left[s.ID] != snaps[s.ID] {
			t.Errorf("the first sweep deleted the snapshot of %s (a recent park, a young orphan, or b's own)", s.ID)
		}
	}
	// a is away: b takes the recent park over, still hibernated in its snapshot
	if info, err := b.r.GetSession(ctx, recent.ID, alice); err != nil || info.State != engine.SessionHibernated {
		t.Errorf("the session parked lately, after the sweep, via b: %+v, %v; want it taken over, hibernated", info, err)
	}

	b.r.sweep(ctx, time.Now().Add(20*time.Minute)) // past OrphanAge, within ParkedFor of the recent park
	left = hibernations(t, b)
	if _, ok := left[lost.ID]; ok {
		t.Errorf("the snapshot of a lost session, older than OrphanAge, is still stored")
	}
	if left[recent.ID] != snaps[recent.ID] || left[kept.ID] != snaps[kept.ID] {
		t.Errorf("the sweep past OrphanAge deleted a parked session's snapshot or b's own: %v", left)
	}
	if r := b.cell(t, kept.ID, "y"); r.Result == nil || *r.Result != "'kept'" || !r.Resumed {
		t.Errorf("b's hibernated session after the sweeps: %+v", r)
	}
}

// waitFor polls cond until it holds, or fails the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
